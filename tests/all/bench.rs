//! `edgegate bench`, the benchmark lab, end to end: the real binary starts the real runtimes
//! (edgegate, native Rust, and Node.js and workerd from `bench/node`), checks every answer,
//! loads them briefly and writes the report. Timing is not asserted: only that everything
//! ran, answered correctly, and was reported.

use std::path::{Path, PathBuf};
use std::process::Command;

use edgegate_bench::workload::{RESIZED, jpeg_size};
use edgegate_testkit::photo;

use crate::support::{Gateway, get, http, post, skipped};

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/node")
}

/// Whether `bench/node/install` has run. When it has not, the comparator test says so loudly;
/// with EDGEGATE_REQUIRE_COMPARATORS=1 (as in CI) that is a failure.
fn comparators_installed() -> bool {
    let installed = node_dir().join("node_modules/sharp").is_dir();
    if !installed {
        let why = "bench/node/node_modules is missing: run bench/node/install (needs npm)";
        skipped("Node.js and workerd comparators", why, "EDGEGATE_REQUIRE_COMPARATORS");
    }
    installed
}

/// Whether `bench/wasmtime/install` has run: skipped loudly when it has not, a failure with
/// EDGEGATE_REQUIRE_COMPARATORS=1 (as in CI).
fn wasmtime_installed() -> bool {
    let installed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/wasmtime/bin/wasmtime").is_file();
    if !installed {
        let why = "bench/wasmtime/bin/wasmtime is missing: run bench/wasmtime/install (needs pip)";
        skipped("the wasmtime serve comparator", why, "EDGEGATE_REQUIRE_COMPARATORS");
    }
    installed
}

fn bench(out: &Path, args: &[&str]) -> serde_json::Value {
    let status = Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .arg("bench")
        .arg("--out")
        .arg(out)
        .args(["--duration", "300ms", "--warmup", "100ms", "--no-saturation"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "edgegate bench: {status}");
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Asserts that a capacity round lost no request, with one allowance for a busy machine: a
/// few sheds (503, 504) in a round whose CPUs the hypervisor or other processes took are said,
/// not failed ([`CapacityRound::excused`]). Returns the answers.
///
/// [`CapacityRound::excused`]: edgegate_bench::results::CapacityRound::excused
fn round_answers(what: &str, round: &serde_json::Value) -> u64 {
    let parsed: edgegate_bench::results::CapacityRound =
        serde_json::from_value(round.clone()).unwrap();
    let errors = parsed.errors;
    if let Some(excused) = parsed.excused() {
        eprintln!("{what}: the machine was busy: {excused}");
    } else {
        assert_eq!(errors.total(), 0, "{what}: {}: {round}", errors.describe());
    }
    assert!(parsed.ok > 0, "{what}: no answer: {round}");
    parsed.ok
}

fn runtime<'a>(results: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    results["runtimes"].as_array().unwrap().iter().find(|r| r["runtime"] == name).unwrap()
}

#[test]
fn every_runtime_gives_the_same_answers_and_is_measured_and_reported() {
    let runtimes =
        if comparators_installed() { "edgegate,native,node,workerd" } else { "edgegate,native" };
    let out = tempfile::tempdir().unwrap();
    let results = bench(
        out.path(),
        &[
            "--runtimes",
            runtimes,
            "--rates",
            "200",
            "--heavy-rates",
            "4",
            "--connections",
            "4",
            "--rounds",
            "3",
        ],
    );
    let pinned = results["meta"]["pinning"].as_str().unwrap().starts_with("load generator on");
    for name in runtimes.split(',') {
        let r = runtime(&results, name);
        assert!(r["missing"].is_null() && r["failed"].is_null(), "{name}: {r}");
        // Before any load, the lab checked each workload's answers: the same JSON bytes, the
        // same 128-byte decision, the same profiles, the same 16 order summaries (each priced
        // from the 100 000-product catalog), a 640×480 JPEG.
        let checks = r["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 6, "{name}");
        for check in checks {
            assert_eq!(check["ok"], true, "{name}: {check}");
        }
        assert!(checks.iter().any(|c| c["workload"] == "json-transform"), "{name}");
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 6, "{name}");
        for run in runs {
            // The runtimes took turns: three slices each, merged; at 4 requests/s the 300 ms
            // run is one slice (each slice has at least 10 requests due).
            let heavy = ["image-resize", "mixed"].contains(&run["workload"].as_str().unwrap());
            let slices = run["round_p99_us"].as_array().unwrap().len();
            assert_eq!(slices, if heavy { 1 } else { 3 }, "{name}: {run}");
            // The VM's steal was read for every slice, on the server's CPUs and (pinned on two
            // or more CPUs) on the generator's.
            assert_eq!(run["round_steal"].as_array().unwrap().len(), slices, "{name}: {run}");
            let steal = &run["steal"];
            assert!(steal["server_pct"].as_f64().is_some_and(|s| (0.0..=100.0).contains(&s)));
            assert_eq!(steal["load_pct"].is_f64(), pinned, "{name}: {run}");
        }
        for run in runs.iter().filter(|run| run["workload"] != "image-resize") {
            assert!(run["ok"].as_u64().unwrap() > 0, "{name}: {run}");
            assert!(run["latency"]["p99"].as_f64().unwrap() > 0.0, "{name}: {run}");
            // CPU time comes in 10 ms ticks: a short run may read zero, never nothing.
            assert!(run["cpu_us_per_request"].as_f64().unwrap() >= 0.0, "{name}: {run}");
        }
        // Starts without the catalog, then the one that loads it, for every runtime.
        let starts = r["cold_start"].as_array().unwrap();
        assert!(starts.len() >= 2, "{name}");
        assert!(starts.last().unwrap()["what"].as_str().unwrap().contains("catalog"), "{name}");
        // Node.js reported its garbage-collection pauses for every run; no other runtime
        // has them.
        for run in runs {
            assert_eq!(run["gc"]["count"].is_u64(), name == "node", "{name}: {run}");
        }
    }
    // edgegate's extra starts: nothing compiled, all cached, one new module version, its
    // hot-swap twins (five swaps: the reload to the first answer, and that answer over the
    // steady p50), and the catalog.
    let starts = runtime(&results, "edgegate")["cold_start"].as_array().unwrap().clone();
    assert_eq!(starts.len(), 6, "{starts:?}");
    for (start, what) in starts[3..5].iter().zip(["POST /reload", "over the steady p50"]) {
        assert!(start["what"].as_str().unwrap().contains(what), "{start}");
        let rounds = start["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 5, "{start}");
    }
    // A reload compiles the new version: it takes more than the steady answer it replaces.
    assert!(starts[3]["ms"].as_f64().unwrap() > 1.0, "{}", starts[3]);

    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("each run is 3 slices per runtime"), "{report}");
    assert!(report.contains("| steal % server / load | calm p99 µs (slices) |"), "{report}");
    // The idle CPUs' wait, read from this machine's /sys, is in the header.
    let idle = results["meta"]["idle"].as_str().unwrap();
    assert!(!idle.is_empty() && report.contains(&format!("- idle CPUs: {idle}\n")), "{report}");
    for section in [
        "## static-json",
        "## db-lookup",
        "## json-transform",
        "## Cold start",
        "## Decision matrix",
    ] {
        assert!(report.contains(section), "{section} missing from the report");
    }
    if runtimes.contains("node") {
        assert!(report.contains("Garbage collection: the pauses V8 reported"), "{report}");
        assert!(report.contains("| garbage-collection pauses, json-transform at 200 rps |"));
    }
    for chart in ["latency-db-lookup.svg", "cdf-static-json.svg", "cpu-auth-check.svg"] {
        let svg = std::fs::read_to_string(out.path().join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{chart}");
        assert!(report.contains(chart), "{chart} not linked from the report");
    }
}

#[test]
fn missing_comparators_are_reported_and_the_rest_run() {
    let out = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let results = bench(
        out.path(),
        &[
            "--runtimes",
            "node,workerd,native,wasmtime-serve",
            "--workloads",
            "db-lookup",
            "--rates",
            "200",
            "--node-dir",
            empty.path().to_str().unwrap(),
            "--wasmtime",
            empty.path().join("wasmtime").to_str().unwrap(),
        ],
    );
    for name in ["node", "workerd", "wasmtime-serve"] {
        let missing = runtime(&results, name)["missing"].as_str().unwrap_or_default().to_string();
        assert!(missing.contains("install") || missing.contains("PATH"), "{name}: {missing}");
    }
    let native = runtime(&results, "native");
    assert!(native["missing"].is_null());
    assert!(native["runs"][0]["ok"].as_u64().unwrap() > 0, "{native}");
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("| node |") && report.contains("**missing**"), "{report}");
}

/// Debian's wrk, for the cross-check; when it is missing the test says so loudly, and with
/// EDGEGATE_REQUIRE_WRK=1 (as in CI) that is a failure.
pub(crate) fn wrk_installed() -> bool {
    let installed = Command::new("wrk").arg("--version").output().is_ok();
    if !installed {
        let why = "wrk is not installed (Debian: apt-get install wrk)";
        skipped("the cross-check with wrk", why, "EDGEGATE_REQUIRE_WRK");
    }
    installed
}

#[test]
fn the_cross_check_runs_wrk_and_the_lab_together_and_reports_both() {
    if !wrk_installed() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let results = bench(
        out.path(),
        &["--runtimes", "edgegate", "--workloads", "db-lookup", "--rates", "400", "--cross-check"],
    );
    let check = &runtime(&results, "edgegate")["cross_check"];
    let rounds = check["rounds"].as_array().unwrap_or_else(|| panic!("no rounds: {check}"));
    assert_eq!(rounds.len(), 4, "{check}");
    for round in rounds {
        // Both tools measured the endpoint: real latencies and a real rate from each.
        for tool in ["wrk", "lab", "lab_sent"] {
            let (p50, p99) =
                (round[tool]["p50"].as_f64().unwrap(), round[tool]["p99"].as_f64().unwrap());
            assert!(p50 > 0.0 && p99 >= p50, "{tool}: {round}");
        }
        assert!(round["wrk_rate"].as_f64().unwrap() > 10.0, "{round}");
    }
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("## Cross-check with wrk"), "{report}");
    assert!(report.contains("| edgegate | **median** |"), "{report}");
}

#[test]
fn the_demo_resizes_a_jpeg_and_refuses_what_is_not_one() {
    let image = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["bench", "--write-image"])
        .arg(image.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let jpeg = std::fs::read(image.path()).unwrap();
    assert_eq!(jpeg, photo::jpeg());
    assert_eq!(jpeg_size(&jpeg), Some(photo::SIZE));

    let gw = Gateway::demo(&[]);
    let reply = post(gw.addr, "/resize", &jpeg);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("image/jpeg"));
    assert_eq!(jpeg_size(&reply.body), Some(RESIZED));

    assert_eq!(post(gw.addr, "/resize", b"not a jpeg").error(), "invalid_image");
    // Cut inside its headers (zune-jpeg fills a picture cut later with grey, as browsers do).
    assert_eq!(post(gw.addr, "/resize", &jpeg[..120]).error(), "invalid_image");
    assert_eq!(get(gw.addr, "/resize").status, 405);
    // Past the worker's 8 MiB body limit: refused from Content-Length, nothing read.
    let huge = http(gw.addr, "POST", "/resize", &[("content-length", "9437184")], b"");
    assert_eq!((huge.status, huge.error().as_str()), (413, "body_too_large"));
}

mod capacity {
    //! The capacity mode against fake servers of known cost (`edgegate bench-fake`): what it
    //! measures of them, and the verdicts it gives.
    //!
    //! These measure CPU, so they run alone: `#[ignore]`d in the parallel run, and run by
    //! `scripts/test` afterwards with `-- --ignored --test-threads=1`. A test running beside
    //! them would be other processes on their CPUs, which is what one of them checks for.

    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    use edgegate_bench::affinity::{CpuPlan, available_cpus};
    use edgegate_bench::lab::capacity::{self, CapacitySettings};
    use edgegate_bench::load::RequestTemplate;
    use edgegate_bench::results::Capacity;
    use edgegate_bench::server::Server;
    use edgegate_bench::verdict::{self, Verdict};
    use edgegate_bench::workload::Workload;

    fn get() -> RequestTemplate {
        RequestTemplate {
            method: http::Method::GET,
            uri: http::Uri::from_static("/"),
            headers: Vec::new(),
            body: bytes::Bytes::new(),
            expect: 200,
        }
    }

    fn cpus() -> CpuPlan {
        let cpus = CpuPlan::new(&available_cpus().unwrap(), true);
        assert!(
            cpus.pinned(),
            "the capacity tests need two CPUs: one for load, one for the server"
        );
        cpus
    }

    /// `edgegate bench-fake` on the server CPUs.
    fn fake(cpus: &CpuPlan, args: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_edgegate"));
        command.args(["bench-fake", "--listen", &addr.to_string()]).args(args);
        Server::start(&mut command, addr, cpus, &get(), Duration::from_secs(30)).unwrap()
    }

    fn settings(rounds: usize, connections: usize) -> CapacitySettings {
        CapacitySettings {
            rounds,
            warmup: Duration::from_millis(300),
            duration: Duration::from_secs(1),
            probe: (Duration::from_millis(100), Duration::from_millis(300)),
            connections: vec![connections],
            growth: 0.03,
            wrk: None,
        }
    }

    fn measure(servers: &[&Server], settings: &CapacitySettings, cpus: &CpuPlan) -> Vec<Capacity> {
        measure_in(std::env::temp_dir().as_path(), servers, settings, cpus)
    }

    fn measure_in(
        work: &std::path::Path,
        servers: &[&Server],
        settings: &CapacitySettings,
        cpus: &CpuPlan,
    ) -> Vec<Capacity> {
        try_measure_in(work, servers, settings, cpus).into_iter().map(|c| c.unwrap()).collect()
    }

    fn try_measure_in(
        work: &std::path::Path,
        servers: &[&Server],
        settings: &CapacitySettings,
        cpus: &CpuPlan,
    ) -> Vec<anyhow::Result<Capacity>> {
        for server in servers {
            server.pause();
        }
        let templates: Arc<[RequestTemplate]> = Arc::from(vec![get()]);
        let workload = Workload::DbLookup;
        let reach = capacity::Reach::plain();
        capacity::measure(servers, workload, &reach, &templates, settings, cpus, work, &|_| ())
            .unwrap()
    }

    /// A server that has died is its own failure: the one measured beside it keeps its
    /// figures.
    #[test]
    fn a_dead_server_fails_alone() {
        let cpus = cpus();
        let (alive, dead) = (fake(&cpus, &["--burn", "10us"]), fake(&cpus, &["--burn", "10us"]));
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &dead.pid().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let measured = try_measure_in(
            std::env::temp_dir().as_path(),
            &[&alive, &dead],
            &settings(2, 4),
            &cpus,
        );
        let alive = measured[0].as_ref().expect("the live server is measured");
        assert_eq!(alive.rounds.len(), 2);
        assert!(alive.rounds.iter().all(|r| r.ok > 0), "{alive:?}");
        let why = format!("{:#}", measured[1].as_ref().expect_err("the dead one fails"));
        assert!(why.contains("round 1") && why.contains("refused"), "{why}");
        assert!(why.contains("killed by signal 9"), "how it ended: {why}");
    }

    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn wrk_cross_checks_each_round_with_a_script_left_for_reuse() {
        if !super::wrk_installed() {
            return;
        }
        let cpus = cpus();
        let server = fake(&cpus, &["--burn", "200us"]);
        let work = tempfile::tempdir().unwrap();
        let settings = CapacitySettings { wrk: Some("wrk".into()), ..settings(1, 4) };
        let c = measure_in(work.path(), &[&server], &settings, &cpus).remove(0);
        let wrk = c.rounds[0].wrk.as_ref().expect("a wrk figure for the round");
        assert!((wrk.rps / c.rounds[0].rps - 1.0).abs() < 0.2, "{c:?}");
        let script = std::fs::read_to_string(work.path().join("wrk-db-lookup.lua"))
            .expect("the wrk script is left in the work directory");
        assert!(script.contains("wrk.format([[GET]], [[/]]"), "{script}");
    }

    fn rps(c: &Capacity) -> Vec<f64> {
        c.rounds.iter().map(|r| r.rps).collect()
    }

    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn a_server_of_known_cost_is_measured_within_ten_percent() {
        let cpus = cpus();
        let server = fake(&cpus, &["--burn", "500us"]);
        let c = measure(&[&server], &settings(3, 4), &cpus).remove(0);
        let cpu = c.cpu_us().unwrap().median;
        let rate = c.rps().unwrap().median;
        // 500 µs burned per request, and the fake's own read, write and thread switch (about
        // 25 µs here): within 10 %.
        assert!((500.0..550.0).contains(&cpu), "{cpu} µs per request: {c:?}");
        // Its one CPU kept busy: a second of it over the CPU each answer costs.
        assert!(c.saturated(), "{c:?}");
        assert!((rate * cpu / 1e6 - 1.0).abs() < 0.1, "{rate} req/s × {cpu} µs: {c:?}");
        assert!((1e6 / 550.0..1e6 / 500.0).contains(&rate), "{rate} req/s");
    }

    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn a_starved_generator_marks_the_figure_a_lower_bound_and_names_itself() {
        let cpus = cpus();
        // A cheap server, and four busy processes on the generator's CPU: the generator gets
        // a fifth of it, too little to keep the server busy.
        let server = fake(&cpus, &["--burn", "2us"]);
        let mut burners: Vec<_> = (0..4)
            .map(|_| {
                let mut spin = std::process::Command::new("sh");
                spin.args(["-c", "while :; do :; done"]);
                cpus.spawn_load(&mut spin).unwrap()
            })
            .collect();
        let c = measure(&[&server], &settings(2, 16), &cpus).remove(0);
        for burner in &mut burners {
            let _ = burner.kill();
            let _ = burner.wait();
        }
        assert!(!c.saturated(), "{c:?}");
        let why = c.rounds[0].bottleneck().unwrap();
        assert!(why.contains("load generator"), "{why}");
        let foreign = c.rounds[0].foreign.unwrap().load_pct.unwrap();
        assert!(foreign > 50.0, "the burners show as other processes: {foreign} %");
        assert!(!c.rounds[0].calm());
    }

    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn identical_servers_are_no_difference_and_a_stalling_one_loses() {
        let cpus = cpus();
        let (a, b) = (fake(&cpus, &["--burn", "100us"]), fake(&cpus, &["--burn", "100us"]));
        let stalling =
            fake(&cpus, &["--burn", "100us", "--stall-every", "200ms", "--stall-for", "40ms"]);
        let measured = measure(&[&a, &b, &stalling], &settings(5, 8), &cpus);
        let (a, b, stalling) = (&measured[0], &measured[1], &measured[2]);
        let same = verdict::compare(&rps(a), &rps(b), true);
        assert!(matches!(same, Verdict::NoDifference(_)), "{same:?}: {:?} {:?}", rps(a), rps(b));
        // Stalled a fifth of the time, it answers about a fifth less.
        let stalled = verdict::compare(&rps(a), &rps(stalling), true);
        assert!(matches!(stalled, Verdict::First(r) if r.ratio > 1.1), "{stalled:?}");
    }

    /// `edgegate-component` serves static-json through `echo-json-component` and db-lookup
    /// through `kv-lookup-component` (wasi:keyvalue): its answers check out byte for byte and
    /// it is measured beside edgegate's core modules, with the same closed loop; it serves
    /// nothing else, and says so instead of a wrong answer. `wasmtime serve`, the reference
    /// host, runs the same static-json file beside it, likewise.
    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn the_component_twin_of_static_json_is_measured_beside_the_core_module() {
        let out = tempfile::tempdir().unwrap();
        let with_wasmtime = super::wasmtime_installed();
        let runtimes = if with_wasmtime {
            "edgegate,edgegate-component,wasmtime-serve"
        } else {
            "edgegate,edgegate-component"
        };
        let args = ["--capacity", "--runtimes", runtimes];
        let workloads = ["--workloads", "static-json,db-lookup", "--rounds", "1"];
        let results = super::bench(out.path(), &[&args[..], &workloads[..]].concat());
        let capacity = |name: &str, workload: &str| {
            let r = super::runtime(&results, name);
            assert!(r["failed"].is_null() && r["missing"].is_null(), "{name}: {r}");
            let found =
                r["capacity"].as_array().unwrap().iter().find(|c| c["workload"] == workload);
            found.map(|c| super::round_answers(&format!("{name} {workload}"), &c["rounds"][0]))
        };
        let measured = |name: &str, workload: &str| {
            capacity(name, workload).unwrap_or_else(|| {
                let r = super::runtime(&results, name);
                panic!("{name}: no {workload} capacity; its checks: {}", r["checks"])
            })
        };
        measured("edgegate", "static-json");
        measured("edgegate", "db-lookup");
        let hosts: &[(&str, &str)] = if with_wasmtime {
            &[("edgegate-component", "wasi:http components"), ("wasmtime-serve", "wasmtime 49.0.3")]
        } else {
            &[("edgegate-component", "wasi:http components")]
        };
        for &(name, version) in hosts {
            measured(name, "static-json");
            let served: &[&str] = if name == "edgegate-component" {
                measured(name, "db-lookup");
                &["static-json", "db-lookup"]
            } else {
                assert_eq!(capacity(name, "db-lookup"), None, "{name} serves no db-lookup");
                &["static-json"]
            };
            let host = super::runtime(&results, name);
            let checks = host["checks"].as_array().unwrap();
            let checked: Vec<&str> =
                checks.iter().map(|c| c["workload"].as_str().unwrap()).collect();
            assert_eq!(checked, served, "{name}: {checks:?}");
            assert!(checks.iter().all(|c| c["ok"] == true), "{name}: {checks:?}");
            assert!(host["version"].as_str().unwrap().contains(version), "{host}");
        }
        let component = super::runtime(&results, "edgegate-component");
        // Its start and hot swap are the component's own: a new version compiled, then swapped.
        let starts = component["cold_start"].as_array().unwrap();
        assert!(starts.iter().any(|s| s["what"].as_str().unwrap().contains("POST /reload")));
        let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(report.contains("| edgegate-component |"), "{report}");
        assert!(!with_wasmtime || report.contains("| wasmtime-serve |"), "{report}");
    }

    /// `--tls`: every runtime that serves TLS is measured over it three ways, beside plain
    /// HTTP, with no failed request; a handshake per request costs the server more CPU than
    /// records on a kept connection.
    #[test]
    #[ignore = "measures CPU: run alone, as scripts/test does"]
    fn capacity_over_tls_is_measured_three_ways_for_every_runtime_that_serves_it() {
        let runtimes =
            if super::comparators_installed() { "edgegate,native,node" } else { "edgegate,native" };
        let out = tempfile::tempdir().unwrap();
        let args = ["--capacity", "--tls", "--runtimes", runtimes, "--workloads", "static-json"];
        let results = super::bench(out.path(), &[&args[..], &["--rounds", "1"]].concat());
        for name in runtimes.split(',') {
            let r = super::runtime(&results, name);
            let capacity = r["capacity"].as_array().unwrap();
            let cpu = |transport: &str| {
                let c =
                    capacity.iter().find(|c| c["transport"] == transport).unwrap_or_else(|| {
                        panic!("{name}: no {transport} capacity: {capacity:?}; its result: {r}")
                    });
                let round = &c["rounds"][0];
                // How many answers a busy machine leaves a round is not the feature: that
                // each way was measured, and what a request cost the server, is.
                super::round_answers(&format!("{name} {transport}"), round);
                round["cpu_us_per_request"].as_f64().unwrap()
            };
            let (plain, kept, resumed, full) =
                (cpu("plain"), cpu("tls"), cpu("tls-resumed"), cpu("tls-full"));
            // (The test binary's edgegate is a debug build: only the handshake's cost stands
            // out clearly from its noise.)
            assert!(
                plain > 0.0 && kept * 1.5 < resumed.min(full),
                "{name}: plain {plain}, kept {kept}, resumed {resumed}, full {full} µs/request"
            );
        }
        let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        for heading in [
            "### static-json over TLS, keep-alive",
            "### static-json over TLS, a resumed handshake per request",
            "### static-json over TLS, a full handshake per request",
        ] {
            assert!(report.contains(heading), "{heading} missing from the report");
        }
    }
}
