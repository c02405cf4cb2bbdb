//! Capacity: how many answers a second a server gives with its CPU kept busy, and what each
//! costs it in CPU.
//!
//! ```text
//!  each server alone:   ramp: 4, 8, 16 … connections, closed loop, until answers/s stop growing
//!  round 1..=rounds:    each server in turn (the others stopped):
//!                         closed loop on its count ─▶ req/s, server CPU %, µs/req, p50/p99,
//!                         steal and other processes' CPU on both sides
//!                         [wrk on the same count right after ─▶ req/s, server CPU]
//! ```
//!
//! A closed loop measures throughput, not latency under a rate: each connection sends its
//! next request the moment the last is answered, so the server sets the pace. When the
//! server's CPUs were not at least 95 % busy, it was not the limit: the figure is marked a
//! lower bound and the round says what was ([`CapacityRound::bottleneck`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;

use super::slices::{foreign, steal, stolen};
use crate::affinity::CpuPlan;
use crate::load::closed::{self, ClosedResult, ClosedSpec};
use crate::load::{RequestTemplate, TlsTransport, Transport, WindowMark};
use crate::procfs;
use crate::results::{Capacity, CapacityRound, LabTransport, WrkRound};
use crate::server::Server;
use crate::workload::Workload;

/// How capacity is measured.
#[derive(Debug, Clone)]
pub struct CapacitySettings {
    /// Rounds, the servers taking turns.
    pub rounds: usize,
    /// Each round's warm-up, not recorded.
    pub warmup: Duration,
    /// Each round's recorded time.
    pub duration: Duration,
    /// The ramp's probes: warm-up and recorded time.
    pub probe: (Duration, Duration),
    /// The connection counts the ramp tries, in order; with one, there is no ramp.
    pub connections: Vec<usize>,
    /// The ramp stops when a count adds less than this share of answers per second.
    pub growth: f64,
    /// Cross-check each round with this wrk, when set.
    pub wrk: Option<PathBuf>,
}

/// A request not answered within this is a failure.
const TIMEOUT: Duration = Duration::from_secs(5);

/// How the generator reaches the servers: plain HTTP, or one of the TLS ways with its
/// client settings (then on each server's TLS listener).
#[derive(Debug, Clone)]
pub struct Reach {
    /// Which way, as the results name it.
    pub transport: LabTransport,
    /// The generator's side of it.
    pub client: Transport,
}

impl Reach {
    /// Plain HTTP on keep-alive connections.
    pub fn plain() -> Self {
        Self { transport: LabTransport::Plain, client: Transport::Plain }
    }

    /// The three TLS ways (keep-alive, a resumed handshake per request, a full one), with a
    /// client that trusts the authority in the PEM file `ca` and verifies `localhost`.
    pub fn tls(ca: &Path) -> anyhow::Result<Vec<Self>> {
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.context("a certificate in the lab's CA file")?)?;
        }
        let roots = Arc::new(roots);
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let client = |resume: bool| -> anyhow::Result<Arc<rustls::ClientConfig>> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            if !resume {
                config.resumption = rustls::client::Resumption::disabled();
            }
            Ok(Arc::new(config))
        };
        LabTransport::TLS
            .into_iter()
            .map(|transport| {
                let per_request = transport != LabTransport::Tls;
                let config = client(transport != LabTransport::TlsFull)?;
                let client =
                    Transport::Tls(TlsTransport { config, name: name.clone(), per_request });
                Ok(Self { transport, client })
            })
            .collect()
    }

    /// Where `server` is reached this way.
    fn addr(&self, server: &Server) -> anyhow::Result<std::net::SocketAddr> {
        match self.client {
            Transport::Plain => Ok(server.addr),
            Transport::Tls(_) => server.tls.context("the server has no TLS listener"),
        }
    }
}

/// Measures each of `servers` on `templates`: its ramp alone, then `settings.rounds` rounds
/// taking turns (the order rotates each round). Each server is resumed for its turns and
/// paused after them. `say` hears what is measured. A server whose ramp or round fails gets
/// that error, and no further turn; the others are measured on. With wrk, its script for the
/// workload is left in `work` as `wrk-WORKLOAD.lua`, for loading a server by hand with the
/// lab's requests (`bench/perf/profile` does).
#[allow(clippy::too_many_arguments)] // Each is one independent input of the measurement.
pub fn measure(
    servers: &[&Server],
    workload: Workload,
    reach: &Reach,
    templates: &Arc<[RequestTemplate]>,
    settings: &CapacitySettings,
    cpus: &CpuPlan,
    work: &Path,
    say: &dyn Fn(String),
) -> anyhow::Result<Vec<anyhow::Result<Capacity>>> {
    let transport = reach.transport;
    let mut out: Vec<anyhow::Result<Capacity>> = servers
        .iter()
        .map(|server| {
            server.resume();
            let ramp = ramp(server, reach, templates, settings, cpus);
            server.pause();
            let (connections, ramp) = ramp.map_err(|e| with_end(e, server))?;
            Ok(Capacity { workload, transport, connections, ramp, rounds: Vec::new() })
        })
        .collect();
    // wrk cross-checks the plain loop only.
    let wrk = settings.wrk.as_ref().filter(|_| reach.transport == LabTransport::Plain);
    let script = match wrk {
        Some(_) => {
            let file = work.join(format!("wrk-{}.lua", workload.name()));
            std::fs::write(&file, wrk_script(templates)?)
                .with_context(|| format!("writing {}", file.display()))?;
            Some(file)
        }
        None => None,
    };
    for round in 0..settings.rounds {
        for turn in 0..servers.len() {
            let k = (turn + round) % servers.len();
            let server = servers[k];
            let Ok(capacity) = &mut out[k] else { continue };
            say(format!(
                "{} capacity, round {} of {} on {} connections",
                workload.name(),
                round + 1,
                settings.rounds,
                capacity.connections
            ));
            server.resume();
            let measured =
                spec(server, reach, capacity.connections, settings.warmup, settings.duration)
                    .and_then(|spec| slice(server, &spec, templates, cpus))
                    .and_then(|mut r| {
                        if let (Some(wrk), Some(script)) = (wrk, &script) {
                            r.wrk = Some(run_wrk(
                                wrk,
                                script,
                                server,
                                capacity.connections,
                                settings,
                                cpus,
                            )?);
                        }
                        Ok(r)
                    });
            server.pause();
            match measured {
                Ok(r) => capacity.rounds.push(r),
                Err(e) => out[k] = Err(with_end(e, server).context(format!("round {}", round + 1))),
            }
        }
    }
    Ok(out)
}

/// `error`, with how `server`'s process ended if it has: a refused connection alone does not
/// say whether the runtime crashed or was killed.
fn with_end(error: anyhow::Error, server: &Server) -> anyhow::Error {
    match server.ended() {
        Some(end) => error.context(end),
        None => error,
    }
}

fn spec(
    server: &Server,
    reach: &Reach,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<ClosedSpec> {
    Ok(ClosedSpec {
        addr: reach.addr(server)?,
        connections,
        warmup,
        duration,
        timeout: TIMEOUT,
        transport: reach.client.clone(),
    })
}

/// Raises the connection count until answers per second stop growing (two counts in a row
/// add less than the growth margin: one short probe can be unlucky); returns the smallest
/// count within the margin of the best, and every probe.
fn ramp(
    server: &Server,
    reach: &Reach,
    templates: &Arc<[RequestTemplate]>,
    settings: &CapacitySettings,
    cpus: &CpuPlan,
) -> anyhow::Result<(usize, Vec<(usize, f64)>)> {
    let mut probes: Vec<(usize, f64)> = Vec::new();
    if let [only] = settings.connections[..] {
        return Ok((only, probes));
    }
    let (warmup, duration) = settings.probe;
    let mut flat = 0;
    for &connections in &settings.connections {
        let spec = spec(server, reach, connections, warmup, duration)?;
        let rps = closed::run(&spec, templates, &cpus.load, &|| None)?.rate();
        let best = probes.iter().map(|p| p.1).fold(0.0, f64::max);
        probes.push((connections, rps));
        flat = if rps < best * (1.0 + settings.growth) { flat + 1 } else { 0 };
        if flat == 2 {
            break;
        }
    }
    let best = probes.iter().map(|p| p.1).fold(0.0, f64::max);
    let chosen = probes
        .iter()
        .find(|p| p.1 >= best * (1.0 - settings.growth))
        .map_or(settings.connections[0], |p| p.0);
    Ok((chosen, probes))
}

/// One round: a closed loop on `spec`, the server's CPU read at the window's edges.
fn slice(
    server: &Server,
    spec: &ClosedSpec,
    templates: &Arc<[RequestTemplate]>,
    cpus: &CpuPlan,
) -> anyhow::Result<CapacityRound> {
    let pid = server.pid();
    let r = closed::run(spec, templates, &cpus.load, &|| WindowMark::read(pid, server.helper()))?;
    Ok(round(&r, cpus))
}

/// A round's figures from what the closed loop saw.
fn round(r: &ClosedResult, cpus: &CpuPlan) -> CapacityRound {
    let window = r.window.as_secs_f64().max(1e-9);
    let server_cpu =
        r.marks.map_or(Duration::ZERO, |(a, b)| b.server_cpu.saturating_sub(a.server_cpu));
    let all = r.cpu_times.as_ref().map_or(1, |(a, _)| a.count()).max(1);
    let server_cpus = if cpus.server.is_empty() { all } else { cpus.server.len() };
    let load_cpus = cpus.load.iter().map(Vec::len).sum::<usize>().max(1);
    let share = |time: Duration, n: usize| time.as_secs_f64() * 100.0 / (window * n as f64);
    let summary = r.latency.summary();
    CapacityRound {
        rps: r.rate(),
        ok: r.ok,
        errors: r.errors,
        server_cpu_pct: share(server_cpu, server_cpus),
        cpu_us_per_request: server_cpu.as_secs_f64() * 1e6 / (r.ok.max(1) as f64),
        p50_us: summary.p50,
        p99_us: summary.p99,
        load_cpu_pct: share(r.load_cpu, load_cpus),
        load_idle_pct: (r.cpu_times.as_ref())
            .filter(|_| cpus.pinned())
            .map(|(from, to)| share(to.idle_since(from, &cpus.load.concat()), load_cpus)),
        steal: r.cpu_times.as_ref().map(|window| {
            let (server, load) = stolen(cpus, window);
            steal(server, load)
        }),
        foreign: r.cpu_times.as_ref().zip(r.marks).map(|(w, m)| foreign(cpus, w, m)),
        wrk: None,
    }
}

/// A wrk script that sends `templates` in turn, as the lab does.
fn wrk_script(templates: &[RequestTemplate]) -> anyhow::Result<String> {
    let mut requests = Vec::with_capacity(templates.len());
    for t in templates {
        let body = std::str::from_utf8(&t.body).context("wrk sends text bodies only")?;
        let quote = |text: &str| -> anyhow::Result<String> {
            let level = (0..8)
                .map(|n| "=".repeat(n))
                .find(|eq| !text.contains(&format!("]{eq}]")))
                .context("no Lua long-string level fits")?;
            Ok(format!("[{level}[{text}]{level}]"))
        };
        let mut headers = String::new();
        for (name, value) in &t.headers {
            let value = value.to_str().context("a header wrk cannot send")?;
            headers.push_str(&format!("[ {} ] = {}, ", quote(name.as_str())?, quote(value)?));
        }
        let body = if body.is_empty() { "nil".to_string() } else { quote(body)? };
        requests.push(format!(
            "    wrk.format({}, {}, {{ {headers}}}, {body}),",
            quote(t.method.as_str())?,
            quote(t.uri.path_and_query().map_or("/", |p| p.as_str()))?,
        ));
    }
    // Built in `init`, once wrk has set its Host header (wrk.format adds it).
    Ok(format!(
        "-- Written by `edgegate bench --capacity`: the lab's requests, in turn.\n\
         local requests = {{}}\nlocal i = 0\n\
         init = function(args)\n  requests = {{\n{}\n  }}\nend\n\
         request = function()\n  i = i % #requests + 1\n  return requests[i]\nend\n",
        requests.join("\n")
    ))
}

/// wrk's closed loop on `connections` for the round's time, and the server's CPU meanwhile.
fn run_wrk(
    wrk: &Path,
    script: &Path,
    server: &Server,
    connections: usize,
    settings: &CapacitySettings,
    cpus: &CpuPlan,
) -> anyhow::Result<WrkRound> {
    let threads = cpus.load.len().max(1).min(connections);
    let seconds = settings.duration.as_secs().max(1);
    let before = procfs::sample(server.pid())?;
    let started = Instant::now();
    let out = cpus
        .spawn_load(
            std::process::Command::new(wrk)
                .arg(format!("-t{threads}"))
                .arg(format!("-c{connections}"))
                .arg(format!("-d{seconds}s"))
                .arg("-s")
                .arg(script)
                .arg(format!("http://{}/", server.addr))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        )
        .with_context(|| format!("starting {}", wrk.display()))?
        .wait_with_output()?;
    let wall = started.elapsed();
    let after = procfs::sample(server.pid())?;
    anyhow::ensure!(out.status.success(), "wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(!stdout.contains("Non-2xx or 3xx responses"), "wrk got errors: {stdout}");
    let rps: f64 = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:")?.trim().parse().ok())
        .with_context(|| format!("no Requests/sec in wrk's output: {stdout}"))?;
    let cpu = after.cpu.saturating_sub(before.cpu);
    let server_cpus = cpus.server.len().max(1);
    Ok(WrkRound {
        rps,
        server_cpu_pct: cpu.as_secs_f64() * 100.0 / (wall.as_secs_f64() * server_cpus as f64),
        cpu_us_per_request: cpu.as_secs_f64() * 1e6 / (rps * wall.as_secs_f64()).max(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::{HeaderName, HeaderValue, Method, Uri};

    #[test]
    fn the_wrk_script_sends_the_same_requests_in_turn() {
        let get = RequestTemplate {
            method: Method::GET,
            uri: Uri::from_static("/kv/user:1"),
            headers: Vec::new(),
            body: Bytes::new(),
            expect: 200,
        };
        let post = RequestTemplate {
            method: Method::POST,
            uri: Uri::from_static("/echo"),
            headers: vec![(
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("application/json"),
            )],
            body: Bytes::from_static(br#"{"a":"]]"}"#),
            expect: 200,
        };
        let script = wrk_script(&[get, post]).unwrap();
        assert!(script.contains(r#"wrk.format([[GET]], [[/kv/user:1]], { }, nil),"#), "{script}");
        assert!(
            script.contains(
                r#"wrk.format([[POST]], [[/echo]], { [ [[content-type]] ] = [[application/json]], }, [=[{"a":"]]"}]=]),"#
            ),
            "{script}"
        );
        assert!(script.contains("init = function(args)") && script.contains("i % #requests + 1"));
    }
}
