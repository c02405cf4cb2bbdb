//! `edgegate bench` (the benchmark lab) and `edgegate bench-native` (the native comparator
//! it starts).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use edgegate_bench::affinity::{CpuPlan, available_cpus};
use edgegate_bench::catalogue::Runtime;
use edgegate_bench::lab::{self, Plan};
use edgegate_bench::runtimes::{Environment, LabTls, SECRET_ENV};
use edgegate_bench::workload::{self, Workload};

/// Run the benchmark lab: edgegate against Node.js, workerd and native Rust.
#[derive(Debug, clap::Args)]
pub struct BenchCommand {
    /// The full plan (capacity, 4 rates as shares of it, 10 s runs, a saturation search per
    /// workload; about an hour). Without it, the quick plan (under two minutes).
    #[arg(long, conflicts_with = "capacity")]
    full: bool,
    /// Only capacity: every light workload in a closed loop with the server's CPU kept busy,
    /// five rounds per runtime taking turns, each cross-checked with wrk when it is on PATH
    /// (about 10 minutes).
    #[arg(long)]
    capacity: bool,
    /// Where report.md, results.json and the SVG charts go.
    #[arg(long, short = 'o', value_name = "DIR", default_value = "bench-report")]
    out: PathBuf,
    /// Runtimes to run, comma-separated: edgegate, node, workerd, native; and on request
    /// edgegate-info (at the default log level), edgegate-wasm (the image path in pure Wasm),
    /// edgegate-component and edgegate-component-info (wasi:http components),
    /// edgegate-rate-local and edgegate-rate-shared (a rate limit on every route, in process
    /// or in a Redis the lab starts), wasmtime-serve.
    #[arg(long, value_delimiter = ',', value_parser = parse_runtime)]
    runtimes: Vec<Runtime>,
    /// Workloads to run, comma-separated: static-json, auth-check, db-lookup, json-transform,
    /// image-resize, mixed.
    #[arg(long, value_delimiter = ',', value_parser = parse_workload)]
    workloads: Vec<Workload>,
    /// Fixed rates of the light workloads, requests per second, instead of shares of their
    /// measured capacity (default: 25, 50, 75 and 90 % of the slowest runtime's capacity in the
    /// full plan; 2000/s quick, half the capacity for db-lookup; 2000,5000,10000 full with
    /// --no-capacity).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    /// Fixed rates of image-resize and mixed (default 10 quick; 5,10,20 full).
    #[arg(long, value_delimiter = ',')]
    heavy_rates: Vec<f64>,
    /// Recorded time per fixed-rate run (e.g. 10s).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Warm-up before each run, not recorded.
    #[arg(long, value_parser = humantime::parse_duration)]
    warmup: Option<Duration>,
    /// Slices each fixed-rate run is cut into, the runtimes taking turns (default 1 quick,
    /// 5 full).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: Option<u32>,
    /// Keep-alive connections.
    #[arg(long)]
    connections: Option<usize>,
    /// Skip the saturation search.
    #[arg(long)]
    no_saturation: bool,
    /// Skip the capacity measurement (fixed rates then use --rates).
    #[arg(long, conflicts_with = "capacity")]
    no_capacity: bool,
    /// Do not pin the load generator and the server to separate CPUs.
    #[arg(long)]
    no_pin: bool,
    /// The JS comparators' directory (default: bench/node here, else in the source tree).
    #[arg(long, value_name = "DIR")]
    node_dir: Option<PathBuf>,
    /// The `wasmtime` CLI the `wasmtime-serve` runtime runs (default: what
    /// bench/wasmtime/install put in bench/wasmtime/bin, here or in the source tree).
    #[arg(long, value_name = "PATH")]
    wasmtime: Option<PathBuf>,
    /// Also measure GET /kv/user:1 of each runtime with wrk (an outside load tool; Debian:
    /// `apt-get install wrk`) at about the first rate, and report how far the lab is from it.
    #[arg(long, value_name = "WRK", num_args = 0..=1, default_missing_value = "wrk")]
    cross_check: Option<PathBuf>,
    /// Measure capacity over TLS too, on one certificate every runtime serves (edgegate,
    /// Node.js's `node:https`, native Rust with rustls; workerd is not measured): keep-alive
    /// connections, a connection with a resumed handshake per request, and one with a full
    /// handshake per request.
    #[arg(long, conflicts_with = "no_capacity")]
    tls: bool,
    /// Write the image-resize test picture (a 1600×1200 JPEG) to FILE and exit.
    #[arg(long, value_name = "FILE")]
    write_image: Option<PathBuf>,
}

fn parse_runtime(name: &str) -> Result<Runtime, String> {
    Runtime::from_name(name).ok_or_else(|| format!("unknown runtime {name:?}"))
}

fn parse_workload(name: &str) -> Result<Workload, String> {
    Workload::from_name(name).ok_or_else(|| format!("unknown workload {name:?}"))
}

impl BenchCommand {
    /// Runs the plan and writes the report.
    pub fn execute(self) -> anyhow::Result<()> {
        if let Some(file) = &self.write_image {
            std::fs::write(file, workload::photo::jpeg())
                .with_context(|| format!("writing {}", file.display()))?;
            println!("wrote {} (a 1600×1200 JPEG)", file.display());
            return Ok(());
        }
        let mut plan = match (self.full, self.capacity) {
            (true, _) => Plan::full(),
            (_, true) => Plan::capacity(),
            _ => Plan::quick(),
        };
        plan.command = std::env::args().collect::<Vec<_>>().join(" ");
        if !self.runtimes.is_empty() {
            plan.runtimes = self.runtimes.clone();
        }
        if !self.workloads.is_empty() {
            plan.workloads = self.workloads.clone();
        }
        if !self.rates.is_empty() {
            plan.rates = self.rates.clone();
            plan.load_fractions.clear();
        }
        if !self.heavy_rates.is_empty() {
            plan.heavy_rates = self.heavy_rates.clone();
        }
        anyhow::ensure!(
            plan.rates.iter().chain(&plan.heavy_rates).all(|r| *r > 0.0),
            "rates must be positive"
        );
        plan.duration = self.duration.unwrap_or(plan.duration);
        plan.warmup = self.warmup.unwrap_or(plan.warmup);
        plan.rounds = self.rounds.map_or(plan.rounds, |n| n as usize);
        plan.connections = self.connections.unwrap_or(plan.connections).max(1);
        if self.no_saturation {
            plan.saturate.clear();
        }
        if self.no_capacity {
            plan.capacity.clear();
        }
        plan.pin = !self.no_pin;
        plan.wrk = self.cross_check.clone();
        if let Some(wrk) = &self.cross_check {
            plan.capacity_settings.wrk = Some(wrk.clone());
        }
        if let Some(rounds) = self.rounds.filter(|_| plan.capacity_only) {
            plan.capacity_settings.rounds = rounds as usize;
        }

        let work = self.out.join("work");
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let work = work.canonicalize()?;
        plan.tls = self.tls;
        let env = Environment {
            edgegate: std::env::current_exe().context("finding the edgegate binary")?,
            node_dir: self.node_dir.clone().unwrap_or_else(|| in_tree("bench/node")),
            wasmtime: self
                .wasmtime
                .clone()
                .unwrap_or_else(|| in_tree("bench/wasmtime/bin/wasmtime")),
            tls: if self.tls { Some(lab_certificate(&work)?) } else { None },
            work,
        };
        let cpus = CpuPlan::new(&available_cpus().context("reading the CPU affinity")?, plan.pin);
        eprintln!(
            "edgegate bench ({} mode): {}; report in {}",
            plan.mode,
            cpus.describe(),
            self.out.display()
        );
        let results = lab::run(&plan, &env, &cpus)?;
        results
            .write(&self.out)
            .with_context(|| format!("writing the report to {}", self.out.display()))?;
        println!("{}", self.out.join("report.md").display());
        let missing: Vec<String> = results
            .runtimes
            .iter()
            .filter_map(|r| Some(format!("{} ({})", r.runtime.name(), r.missing.as_ref()?)))
            .collect();
        if !missing.is_empty() {
            eprintln!("missing comparators: {}", missing.join(", "));
        }
        Ok(())
    }
}

/// A certificate for localhost and the authority that issued it, written into `work/tls`.
fn lab_certificate(work: &Path) -> anyhow::Result<LabTls> {
    let dir = work.join("tls");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let authority = edgegate_host::demo::tls::Authority::new("edgegate lab CA")?;
    let (cert, key) = authority.issue(&["localhost", "127.0.0.1"])?.write(&dir, "localhost")?;
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, authority.pem())?;
    Ok(LabTls { cert, key, ca })
}

/// `path` in the working directory, else the one in the source tree this binary was built
/// from.
fn in_tree(path: &str) -> PathBuf {
    let here = Path::new(path);
    if here.exists() {
        return here.canonicalize().unwrap_or_else(|_| here.to_path_buf());
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The lab's native-Rust comparator: the workloads on plain hyper (started by `edgegate bench`).
#[derive(Debug, clap::Args)]
pub struct BenchNativeCommand {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The db-lookup store: a KV seed file (NDJSON of {"key": …, "value": …} lines, or one
    /// JSON object).
    #[arg(long, value_name = "FILE")]
    profiles: PathBuf,
    /// The json-transform catalog: a KV seed file of SKU to product JSON.
    #[arg(long, value_name = "FILE")]
    catalog: PathBuf,
    /// Serve TLS on this address too (rustls with ring, session tickets on).
    #[arg(long, value_name = "ADDR", requires_all = ["tls_cert", "tls_key"])]
    tls_listen: Option<SocketAddr>,
    /// The TLS certificate chain (PEM).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The TLS key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
}

impl BenchNativeCommand {
    /// Serves until killed.
    pub fn execute(self) -> anyhow::Result<()> {
        let secret = std::env::var(SECRET_ENV).unwrap_or_else(|_| workload::SECRET.into());
        let profiles = read_seed(&self.profiles)?;
        let catalog = read_seed(&self.catalog)?;
        let tls = match (self.tls_listen, &self.tls_cert, &self.tls_key) {
            (Some(addr), Some(cert), Some(key)) => {
                Some((addr, edgegate_bench::native::tls_config(cert, key)?))
            }
            _ => None,
        };
        edgegate_bench::native::Native::new(secret.as_bytes(), profiles, catalog)?
            .serve(self.listen, tls)
    }
}

/// A KV seed file's entries, read with the same parser as edgegate's KV namespaces.
fn read_seed(file: &Path) -> anyhow::Result<Vec<(String, bytes::Bytes)>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(edgegate_kv::parse_seed(&text)
        .with_context(|| format!("parsing {}", file.display()))?
        .into_iter()
        .map(|e| (String::from_utf8_lossy(&e.key).into_owned(), bytes::Bytes::from(e.value)))
        .collect())
}

/// A fake server of known cost, for the lab's own tests: answers every request `200 ok`
/// after burning `--burn` of CPU, and stalls `--stall-for` every `--stall-every`.
#[derive(Debug, clap::Args)]
pub struct BenchFakeCommand {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// CPU time to burn per request (e.g. 200us).
    #[arg(long, value_parser = humantime::parse_duration)]
    burn: Duration,
    /// How often to stall (e.g. 500ms).
    #[arg(long, value_parser = humantime::parse_duration, requires = "stall_for")]
    stall_every: Option<Duration>,
    /// How long each stall lasts (e.g. 50ms).
    #[arg(long, value_parser = humantime::parse_duration, requires = "stall_every")]
    stall_for: Option<Duration>,
}

impl BenchFakeCommand {
    /// Serves until killed.
    pub fn execute(self) -> anyhow::Result<()> {
        let listener = std::net::TcpListener::bind(self.listen)
            .with_context(|| format!("binding {}", self.listen))?;
        let fake = edgegate_bench::fake::Fake {
            burn: self.burn,
            stall: self.stall_every.zip(self.stall_for),
        };
        Ok(fake.serve(listener)?)
    }
}
