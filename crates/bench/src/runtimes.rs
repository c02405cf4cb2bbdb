//! How the lab prepares each runtime under test ([`crate::catalogue`]): its directory, its
//! configuration and the modules or scripts it serves, its program and arguments, and its
//! start ([`Prepared::start`], which gives a [`Server`]). A runtime that is not installed is
//! reported missing, with the reason, and the rest run.

use std::ffi::OsString;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use edgegate_testkit::redis::RedisServer;

use crate::affinity::CpuPlan;
use crate::catalogue::Runtime;
use crate::load::RequestTemplate;
use crate::server::Server;
use crate::workload::{Fixtures, SECRET};

/// The environment variable each comparator reads the HS256 secret from.
pub const SECRET_ENV: &str = "EDGEGATE_BENCH_SECRET";

/// What [`Environment::trim_access_log`] keeps of a log.
const KEPT_LOG: u64 = 1 << 20;

/// Where things are.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The `edgegate` binary (for `serve` and `bench-native`).
    pub edgegate: PathBuf,
    /// `bench/node` of the repository: the JS comparators and their `node_modules`.
    pub node_dir: PathBuf,
    /// The `wasmtime` CLI for `wasmtime serve` (`bench/wasmtime/install` puts it in
    /// `bench/wasmtime/bin`).
    pub wasmtime: PathBuf,
    /// A scratch directory for configurations, data, caches and logs.
    pub work: PathBuf,
    /// A certificate for `localhost` that every runtime serves TLS with, when the lab
    /// measures TLS.
    pub tls: Option<LabTls>,
}

/// The lab's TLS files (PEM).
#[derive(Debug, Clone)]
pub struct LabTls {
    /// The chain for `localhost`.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The authority that issued it: what the generator trusts.
    pub ca: PathBuf,
}

/// A runtime ready to start: its command, with `{port}` where the port goes.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Which runtime.
    pub runtime: Runtime,
    /// What it reports as its version.
    pub version: String,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, OsString)>,
    log: PathBuf,
    /// Its files, json-transform's `catalog.ndjson` among them.
    dir: PathBuf,
    /// The port of the `redis-server` it needs started first (`edgegate-rate-shared`'s).
    redis: Option<u16>,
}

/// The start of the lab's edgegate configuration, and all that `edgegate-component` serves:
/// `echo-json` read from a file, so that a new version can be deployed. With
/// [`OTHER_WORKLOADS_CONFIG`], the bench workers under the policy the other runtimes apply
/// too. The light workers get a 10 ms CPU budget instead of the default 2 ms: the lab
/// measures throughput, and on a loaded machine the metering may charge a preempted poll up
/// to one epoch tick of wall time (crates/runtime/src/limits/cpu.rs), which a 2 ms budget can turn
/// into a false stop. 10 ms is the most a worker may have and still be called without a
/// fiber, as the default lets echo-json and auth-router be (until 2026-12-06 it was 20 ms).
const STATIC_JSON_CONFIG: &str = r#"# Written by `edgegate bench`.
[runtime]
cache_dir = "cache"

[workers.echo-json]
module = "modules/echo-json.wasm"
limits = { cpu = "10ms" }

[[routes]]
path = "/echo"
methods = ["POST"]
worker = "echo-json"
"#;

/// The rest of the lab's edgegate configuration: the workers of the other workloads.
const OTHER_WORKLOADS_CONFIG: &str = r#"
[workers.auth-router]
module = "builtin:auth-router"
limits = { cpu = "10ms" }
upstreams = ["service-a", "service-b"]

[workers.auth-router.config]
claim_headers = "sub:x-jwt-sub,scope:x-jwt-scope"
dry_run = "true"

[workers.auth-router.jwt]
issuer = "edgegate-bench"
required_claims = ["exp", "sub"]

[[workers.auth-router.jwt.keys]]
kid = "bench"
alg = "HS256"
secret_env = "EDGEGATE_BENCH_SECRET"

[[routes]]
prefix = "/auth/"
worker = "auth-router"

[upstreams.service-a]
url = "builtin:demo-origin"

[upstreams.service-b]
url = "builtin:demo-origin"

{db_lookup}
[kv.catalog]
backend = "memory"
seed = "catalog.ndjson"

[workers.json-transform]
module = "builtin:json-transform"
limits = { cpu = "10ms" }
kv = ["catalog"]

[[routes]]
path = "/orders/summary"
methods = ["POST"]
worker = "json-transform"

{image_resize}
[[routes]]
path = "/resize"
methods = ["POST"]
worker = "image-resize"
"#;

/// The db-lookup workload's namespace, worker and route, the worker's module `{kv_lookup}`:
/// `builtin:kv-lookup`, or for `edgegate-component` `builtin:kv-lookup-component`, the same
/// answers through `wasi:keyvalue`.
const DB_LOOKUP_CONFIG: &str = r#"
[kv.bench]
backend = "memory"
seed = "profiles.ndjson"

[workers.kv-lookup]
module = "{kv_lookup}"
limits = { cpu = "10ms" }
kv = ["bench"]

[workers.kv-lookup.config]
namespace = "bench"
content_type = "application/json"

[[routes]]
prefix = "/kv/"
methods = ["GET", "PUT"]
worker = "kv-lookup"
"#;

/// The image-resize worker with the host's image capability.
const IMAGE_CAPABILITY: &str = r#"[workers.image-resize]
module = "builtin:image-resize"
image = true

[workers.image-resize.limits]
cpu = "250ms"
request_body = "8MiB"
"#;

/// The image-resize worker in pure Rust inside Wasm: a 2-megapixel picture decodes to 8 MB of
/// pixels in its memory.
const IMAGE_WASM: &str = r#"[workers.image-resize]
module = "builtin:image-resize-wasm"

[workers.image-resize.limits]
memory = "32MiB"
cpu = "250ms"
request_body = "8MiB"
"#;

/// The `wasmtime serve` the lab compares with: the version `bench/wasmtime/install` pins.
const WASMTIME_SERVE_VERSION: &str = "49.0.3";

/// The rate limit `edgegate-rate-local` and `-shared` put on every route: keyed by the
/// client's address (the generator's, one key), at a rate no load reaches, so that every
/// request is counted and let through.
const RATE_LIMIT: &str = r#"
[rate_limits.lab]
requests = 100000000
key = ["ip"]
"#;

/// What `edgegate-rate-shared` adds to [`RATE_LIMIT`]: the count in the lab's Redis.
const RATE_LIMIT_SHARED: &str = r#"scope = "shared"
url = "redis://127.0.0.1:{redis}"
"#;

/// The lab's edgegate configuration for `runtime` (an edgegate one).
fn edgegate_config(runtime: Runtime) -> String {
    let limited = |config: String, policy: &str| {
        config.replace("[[routes]]\n", "[[routes]]\nrate_limits = [\"lab\"]\n") + policy
    };
    match runtime {
        Runtime::EdgegateRateLocal => {
            return limited(edgegate_config(Runtime::Edgegate), RATE_LIMIT);
        }
        Runtime::EdgegateRateShared => {
            let policy = RATE_LIMIT.to_owned() + RATE_LIMIT_SHARED;
            return limited(edgegate_config(Runtime::Edgegate), &policy);
        }
        _ => {}
    }
    let db_lookup = |module: &str| DB_LOOKUP_CONFIG.replace("{kv_lookup}", module);
    let image = match runtime {
        // `echo-json-component` is deployed to echo-json's file; db-lookup is the component
        // twin of kv-lookup; nothing else is served.
        Runtime::EdgegateComponent | Runtime::EdgegateComponentInfo => {
            return STATIC_JSON_CONFIG.to_owned() + &db_lookup("builtin:kv-lookup-component");
        }
        Runtime::EdgegateWasm => IMAGE_WASM,
        _ => IMAGE_CAPABILITY,
    };
    let others = OTHER_WORKLOADS_CONFIG.replace("{image_resize}", image);
    STATIC_JSON_CONFIG.to_owned() + &others.replace("{db_lookup}", &db_lookup("builtin:kv-lookup"))
}

impl Environment {
    /// Writes what `runtime` needs into the work directory, or says why it cannot run.
    pub fn prepare(&self, runtime: Runtime, fixtures: &Fixtures) -> Result<Prepared, String> {
        let dir = self.work.join(runtime.name());
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let write = |name: &str, data: &[u8]| {
            fs::write(dir.join(name), data).map_err(|e| format!("writing {name}: {e}"))
        };
        let log = self.work.join(format!("{}.log", runtime.name()));
        let env = vec![(SECRET_ENV.to_string(), OsString::from(SECRET))];
        let edgegate_version = format!("edgegate {}", env!("CARGO_PKG_VERSION"));
        match runtime {
            Runtime::Edgegate
            | Runtime::EdgegateInfo
            | Runtime::EdgegateWasm
            | Runtime::EdgegateComponent
            | Runtime::EdgegateComponentInfo
            | Runtime::EdgegateRateLocal
            | Runtime::EdgegateRateShared => {
                let redis = match runtime {
                    Runtime::EdgegateRateShared => Some(redis_port()?),
                    _ => None,
                };
                let mut config = edgegate_config(runtime);
                if let Some((port, _)) = &redis {
                    config = config.replace("{redis}", &port.to_string());
                }
                if let Some(tls) = &self.tls {
                    // The port comes from `--tls-listen`.
                    config.push_str(&format!(
                        "\n[server.tls]\ncertificates = [{{ cert = {:?}, key = {:?} }}]\n",
                        tls.cert.display().to_string(),
                        tls.key.display().to_string(),
                    ));
                }
                write("edgegate.toml", config.as_bytes())?;
                write("profiles.ndjson", fixtures.profiles_ndjson().as_bytes())?;
                write("catalog.ndjson", fixtures.catalog.as_bytes())?;
                self.deploy_echo_json(runtime, 0)?;
                let config = dir.join("edgegate.toml");
                Ok(Prepared {
                    runtime,
                    version: match runtime {
                        Runtime::EdgegateInfo => {
                            format!("{edgegate_version} (its default log level, info)")
                        }
                        Runtime::EdgegateWasm => format!("{edgegate_version} (image-resize-wasm)"),
                        Runtime::EdgegateComponent => format!(
                            "{edgegate_version} (static-json and db-lookup, as wasi:http components)"
                        ),
                        Runtime::EdgegateComponentInfo => format!(
                            "{edgegate_version} (as edgegate-component, at its default log level, info)"
                        ),
                        Runtime::EdgegateRateLocal => {
                            format!("{edgegate_version} (a rate limit on every route, in process)")
                        }
                        Runtime::EdgegateRateShared => format!(
                            "{edgegate_version} (a rate limit on every route, shared in {} on the load CPUs)",
                            redis.as_ref().map_or("", |(_, version)| version.as_str())
                        ),
                        _ => edgegate_version,
                    },
                    redis: redis.map(|(port, _)| port),
                    program: self.edgegate.clone(),
                    args: [
                        args(&[
                            "serve".as_ref(),
                            "--config".as_ref(),
                            config.as_os_str(),
                            "--listen".as_ref(),
                            "127.0.0.1:{port}".as_ref(),
                            "--admin".as_ref(),
                            "127.0.0.1:{admin}".as_ref(),
                        ]),
                        self.tls_args(&["--tls-listen"]),
                    ]
                    .concat(),
                    // The lab's level is `warn`; `edgegate-info` and `edgegate-component-info`
                    // get none, so serve at the default (nothing is inherited: see `start`).
                    env: if runtime.logs_access() {
                        env
                    } else {
                        [env, vec![("EDGEGATE_LOG".into(), "warn".into())]].concat()
                    },
                    log,
                    dir,
                })
            }
            Runtime::Native => {
                write("profiles.ndjson", fixtures.profiles_ndjson().as_bytes())?;
                write("catalog.ndjson", fixtures.catalog.as_bytes())?;
                let profiles = dir.join("profiles.ndjson");
                let catalog = dir.join("catalog.ndjson");
                Ok(Prepared {
                    runtime,
                    version: format!("{edgegate_version} bench-native (hyper, no Wasm)"),
                    program: self.edgegate.clone(),
                    args: args(&[
                        "bench-native".as_ref(),
                        "--listen".as_ref(),
                        "127.0.0.1:{port}".as_ref(),
                        "--profiles".as_ref(),
                        profiles.as_os_str(),
                        "--catalog".as_ref(),
                        catalog.as_os_str(),
                    ])
                    .into_iter()
                    .chain(self.tls_args(&["--tls-listen", "--tls-cert", "--tls-key"]))
                    .collect(),
                    env,
                    log,
                    dir,
                    redis: None,
                })
            }
            Runtime::Node => {
                let node = version_of("node", &["--version"])
                    .ok_or("`node` is not on PATH (install Node.js 20 or later)")?;
                let sharp = package_version(&self.node_dir, "sharp").ok_or_else(|| {
                    format!("sharp is not installed: run {}/install", self.node_dir.display())
                })?;
                write("profiles.json", fixtures.profiles_json().as_bytes())?;
                write("catalog.ndjson", fixtures.catalog.as_bytes())?;
                let mut env = env;
                env.push(("EDGEGATE_BENCH_PORT".into(), "{port}".into()));
                env.push(("EDGEGATE_BENCH_PROFILES".into(), dir.join("profiles.json").into()));
                env.push(("EDGEGATE_BENCH_CATALOG".into(), dir.join("catalog.ndjson").into()));
                if let Some(tls) = &self.tls {
                    env.push(("EDGEGATE_BENCH_TLS_PORT".into(), "{tls}".into()));
                    env.push(("EDGEGATE_BENCH_TLS_CERT".into(), tls.cert.clone().into()));
                    env.push(("EDGEGATE_BENCH_TLS_KEY".into(), tls.key.clone().into()));
                }
                Ok(Prepared {
                    runtime,
                    version: format!("node {node}, sharp {sharp}"),
                    program: "node".into(),
                    args: vec![self.node_dir.join("server.mjs").into()],
                    env,
                    log,
                    dir,
                    redis: None,
                })
            }
            Runtime::WasmtimeServe => {
                let version = version_of(&self.wasmtime, &["--version"]).ok_or_else(|| {
                    format!(
                        "{} is not installed: run bench/wasmtime/install",
                        self.wasmtime.display()
                    )
                })?;
                // `wasmtime 49.0.3 (f96eabaa1 2026-10-14)`
                if version.split_whitespace().nth(1) != Some(WASMTIME_SERVE_VERSION) {
                    return Err(format!(
                        "{} is {version}, not wasmtime {WASMTIME_SERVE_VERSION}: run bench/wasmtime/install",
                        self.wasmtime.display()
                    ));
                }
                write("echo-json-component.wasm", edgegate_guests::ECHO_JSON_COMPONENT)?;
                let component = dir.join("echo-json-component.wasm");
                Ok(Prepared {
                    runtime,
                    version: format!("{version}, serve at its defaults"),
                    program: self.wasmtime.clone(),
                    args: args(&[
                        "serve".as_ref(),
                        "--addr".as_ref(),
                        "127.0.0.1:{port}".as_ref(),
                        "--no-logging-prefix".as_ref(),
                        component.as_os_str(),
                    ]),
                    env,
                    log,
                    dir,
                    redis: None,
                })
            }
            Runtime::Workerd => {
                let binary = workerd_binary(&self.node_dir).ok_or_else(|| {
                    format!("workerd is not installed: run {}/install", self.node_dir.display())
                })?;
                let version = version_of(&binary, &["--version"])
                    .ok_or_else(|| format!("{} --version failed", binary.display()))?;
                if version_of("node", &["--version"]).is_none() {
                    // Not needed to run workerd, but the worker's sources came with npm.
                    return Err("`node` is not on PATH".into());
                }
                for file in ["workerd.capnp", "worker.mjs", "workloads.mjs", "resize-js.mjs"] {
                    copy(&self.node_dir.join(file), &dir.join(file))?;
                }
                let jpeg = self.node_dir.join("node_modules/jpeg-js/lib");
                copy(&jpeg.join("decoder.js"), &dir.join("jpeg-decoder.js"))?;
                copy(&jpeg.join("encoder.js"), &dir.join("jpeg-encoder.js"))?;
                write("profiles.json", fixtures.profiles_json().as_bytes())?;
                write("catalog.ndjson", fixtures.catalog.as_bytes())?;
                let config = dir.join("workerd.capnp");
                Ok(Prepared {
                    runtime,
                    version,
                    program: binary,
                    args: args(&[
                        "serve".as_ref(),
                        config.as_os_str(),
                        "--socket-addr".as_ref(),
                        "http=127.0.0.1:{port}".as_ref(),
                    ]),
                    env,
                    log,
                    dir,
                    redis: None,
                })
            }
        }
    }

    /// The TLS flags of a runtime started by `edgegate`, when the lab measures TLS: `flags`
    /// names the listen address, then (if given) the certificate and the key.
    fn tls_args(&self, flags: &[&str]) -> Vec<OsString> {
        let Some(tls) = &self.tls else { return Vec::new() };
        let values =
            [OsString::from("127.0.0.1:{tls}"), tls.cert.clone().into(), tls.key.clone().into()];
        flags.iter().zip(values).flat_map(|(flag, value)| [OsString::from(flag), value]).collect()
    }

    /// Writes version `n` of the `echo-json` module that an edgegate `runtime` of the lab serves
    /// (`echo-json-component` for `edgegate-component` and `-info`): the same code with a custom section
    /// naming the version, so it is a new module to the cache.
    pub fn deploy_echo_json(&self, runtime: Runtime, n: u32) -> Result<(), String> {
        let dir = self.work.join(runtime.name()).join("modules");
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut wasm = if runtime.is_edgegate_component() {
            edgegate_guests::ECHO_JSON_COMPONENT
        } else {
            edgegate_guests::ECHO_JSON
        }
        .to_vec();
        append_custom_section(&mut wasm, "edgegate-bench-version", n.to_string().as_bytes());
        fs::write(dir.join("echo-json.wasm"), wasm)
            .map_err(|e| format!("writing echo-json.wasm: {e}"))
    }

    /// Cuts `edgegate-info`'s (or `edgegate-component-info`'s) log, an access line per request of the whole run (a gigabyte
    /// or more), to its first MiB: the start and the first requests, what a
    /// failure needs.
    pub fn trim_access_log(&self, runtime: Runtime) -> std::io::Result<()> {
        let path = self.work.join(format!("{}.log", runtime.name()));
        let file = fs::OpenOptions::new().write(true).open(path)?;
        if file.metadata()?.len() > KEPT_LOG {
            file.set_len(KEPT_LOG)?;
        }
        Ok(())
    }

    /// Empties an edgegate runtime's module cache, so its next start compiles every module.
    pub fn clear_module_cache(&self, runtime: Runtime) -> std::io::Result<()> {
        match fs::remove_dir_all(self.work.join(runtime.name()).join("cache")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn args(parts: &[&std::ffi::OsStr]) -> Vec<OsString> {
    parts.iter().map(|p| p.to_os_string()).collect()
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    fs::copy(from, to).map(drop).map_err(|e| format!("copying {}: {e}", from.display()))
}

/// A custom section (id 0: name, then payload) at the end of a module.
fn append_custom_section(wasm: &mut Vec<u8>, name: &str, payload: &[u8]) {
    fn leb128(out: &mut Vec<u8>, mut n: usize) {
        loop {
            let byte = (n & 0x7F) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb128(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    wasm.push(0);
    leb128(wasm, body.len());
    wasm.extend_from_slice(&body);
}

fn version_of(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn package_version(node_dir: &Path, package: &str) -> Option<String> {
    let text = fs::read_to_string(node_dir.join("node_modules").join(package).join("package.json"))
        .ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["version"].as_str().map(String::from)
}

/// The workerd binary npm installed for this platform.
fn workerd_binary(node_dir: &Path) -> Option<PathBuf> {
    let scope = node_dir.join("node_modules/@cloudflare");
    fs::read_dir(scope)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("workerd-"))
        .map(|e| e.path().join("bin/workerd"))
        .find(|p| p.is_file())
}

/// A port for the lab's `redis-server`, and its version; an error when it is not installed.
fn redis_port() -> Result<(u16, String), String> {
    let version = version_of("redis-server", &["--version"]).ok_or(
        "redis-server is not installed (Debian: apt-get install redis-server)".to_string(),
    )?;
    // `Redis server v=7.0.15 sha=…`
    let version = version.split_whitespace().nth(2).unwrap_or("").replace("v=", "redis-server ");
    Ok((free_port().map_err(|e| format!("a port for redis-server: {e}"))?, version))
}

/// A free loopback port (bound and released: another process could take it in between,
/// which the lab reports as a failed start).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Prepared {
    /// Writes the json-transform catalog the runtime loads at its next start: the lab's, or
    /// an empty one so that a start measures the runtime, not 100 000 products being loaded.
    pub fn write_catalog(&self, catalog: &str) -> anyhow::Result<()> {
        let file = self.dir.join("catalog.ndjson");
        fs::write(&file, catalog).with_context(|| format!("writing {}", file.display()))
    }

    /// Starts the runtime on the server CPUs and waits until `probe` gets a 200 (the time
    /// that takes is its start time), for at most `timeout`.
    pub fn start(
        &self,
        cpus: &CpuPlan,
        probe: &RequestTemplate,
        timeout: Duration,
    ) -> anyhow::Result<Server> {
        let port = free_port()?.to_string();
        let admin_port = free_port()?.to_string();
        let tls_port = free_port()?.to_string();
        let fill = |s: &OsString| {
            let s = s.to_string_lossy();
            OsString::from(
                s.replace("{port}", &port)
                    .replace("{admin}", &admin_port)
                    .replace("{tls}", &tls_port),
            )
        };
        let log = fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let mut command = Command::new(&self.program);
        command
            .args(self.args.iter().map(fill))
            // Each runtime's logging is the lab's choice, never the caller's environment.
            .env_remove("EDGEGATE_LOG")
            .env_remove("EDGEGATE_LOG_FORMAT")
            .envs(self.env.iter().map(|(k, v)| (k, fill(v))))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        // On the load CPUs: a fleet's Redis is another machine's work, not the gateway's.
        let redis = self
            .redis
            .map(|port| RedisServer::start_with(port, |command| cpus.spawn_load(command)))
            .transpose()
            .context("starting redis-server")?;
        let mut server =
            Server::start(&mut command, addr, cpus, probe, timeout).with_context(|| {
                format!("starting {} (its log: {})", self.runtime.name(), self.log.display())
            })?;
        server.redis = redis;
        let names = |placeholder: &str| {
            self.args
                .iter()
                .chain(self.env.iter().map(|(_, v)| v))
                .any(|a| a.to_string_lossy().contains(placeholder))
        };
        if names("{admin}") {
            server.admin = Some(format!("127.0.0.1:{admin_port}").parse()?);
        }
        if names("{tls}") {
            server.tls = Some(format!("127.0.0.1:{tls_port}").parse()?);
        }
        Ok(server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    #[test]
    fn a_custom_section_changes_the_module_but_not_its_code() {
        let mut wasm = wat_empty();
        let before = wasm.len();
        append_custom_section(&mut wasm, "edgegate-bench-version", b"7");
        assert_eq!(&wasm[before..before + 2], &[0, 24]);
        assert_eq!(&wasm[before + 2..before + 3], &[22]);
        assert_eq!(&wasm[wasm.len() - 1..], b"7");
    }

    #[test]
    fn the_two_edgegates_differ_only_in_the_image_worker() {
        let capability = edgegate_config(Runtime::Edgegate);
        let wasm = edgegate_config(Runtime::EdgegateWasm);
        for placeholder in ["{image_resize}", "{db_lookup}", "{kv_lookup}"] {
            assert!(!capability.contains(placeholder) && !wasm.contains(placeholder));
        }
        assert!(capability.contains("module = \"builtin:kv-lookup\""), "{capability}");
        assert!(capability.contains("builtin:image-resize\"\nimage = true"));
        assert!(wasm.contains("builtin:image-resize-wasm") && !wasm.contains("image = true"));
        let without = |c: &str, block: &str| c.replace(block, "");
        assert_eq!(without(&capability, IMAGE_CAPABILITY), without(&wasm, IMAGE_WASM));
        assert_eq!(Runtime::from_name("edgegate-wasm"), Some(Runtime::EdgegateWasm));
        assert!(!Runtime::ALL.contains(&Runtime::EdgegateWasm), "on request only");
    }

    #[test]
    fn the_component_edgegate_serves_static_json_and_db_lookup_as_components() {
        let config = edgegate_config(Runtime::EdgegateComponent);
        assert!(config.contains("module = \"modules/echo-json.wasm\""), "{config}");
        assert!(config.contains("module = \"builtin:kv-lookup-component\""), "{config}");
        assert!(!config.contains("builtin:kv-lookup\""), "{config}");
        assert_eq!(config.matches("[[routes]]").count(), 2, "{config}");
        assert_eq!(Runtime::from_name("edgegate-component"), Some(Runtime::EdgegateComponent));
        assert!(!Runtime::ALL.contains(&Runtime::EdgegateComponent), "on request only");
        let served: Vec<_> =
            Workload::ALL.into_iter().filter(|&w| Runtime::EdgegateComponent.serves(w)).collect();
        assert_eq!(served, [Workload::StaticJson, Workload::DbLookup]);
        assert!(Workload::ALL.into_iter().all(|w| Runtime::Edgegate.serves(w)));
    }

    #[test]
    fn wasmtime_serve_runs_the_components_file_and_only_the_pinned_version() {
        assert_eq!(Runtime::from_name("wasmtime-serve"), Some(Runtime::WasmtimeServe));
        assert!(!Runtime::ALL.contains(&Runtime::WasmtimeServe), "on request only");
        let served: Vec<_> =
            Workload::ALL.into_iter().filter(|&w| Runtime::WasmtimeServe.serves(w)).collect();
        assert_eq!(served, [Workload::StaticJson]);
        let work = tempfile::tempdir().unwrap();
        // A stand-in CLI that only answers `--version`, as the given version.
        let cli = |version: &str| {
            let path = work.path().join(format!("wasmtime-{version}"));
            fs::write(&path, format!("#!/bin/sh\necho 'wasmtime {version} (abc 2026-10-14)'\n"))
                .unwrap();
            fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            path
        };
        let env = |wasmtime: PathBuf| Environment {
            edgegate: "edgegate".into(),
            node_dir: "bench/node".into(),
            wasmtime,
            work: work.path().into(),
            tls: None,
        };
        let fixtures = Fixtures::generate();
        let prepared = env(cli("49.0.3")).prepare(Runtime::WasmtimeServe, &fixtures).unwrap();
        let component = prepared.dir.join("echo-json-component.wasm");
        assert_eq!(fs::read(&component).unwrap(), edgegate_guests::ECHO_JSON_COMPONENT);
        assert_eq!(prepared.args[..3], ["serve", "--addr", "127.0.0.1:{port}"]);
        assert_eq!(prepared.args.last(), Some(&component.into_os_string()));
        let other = env(cli("48.0.0")).prepare(Runtime::WasmtimeServe, &fixtures).unwrap_err();
        assert!(other.contains("not wasmtime 49.0.3"), "{other}");
        let missing = env(work.path().join("none")).prepare(Runtime::WasmtimeServe, &fixtures);
        assert!(missing.unwrap_err().contains("bench/wasmtime/install"));
    }

    #[test]
    fn edgegate_info_is_the_lab_configuration_at_the_default_log_level() {
        let work = tempfile::tempdir().unwrap();
        let env = Environment {
            edgegate: "edgegate".into(),
            node_dir: "bench/node".into(),
            wasmtime: "bench/wasmtime/bin/wasmtime".into(),
            work: work.path().into(),
            tls: None,
        };
        let fixtures = Fixtures::generate();
        let level = |runtime| {
            let prepared = env.prepare(runtime, &fixtures).unwrap();
            let config = fs::read_to_string(prepared.dir.join("edgegate.toml")).unwrap();
            let level =
                prepared.env.iter().find(|(k, _)| k == "EDGEGATE_LOG").map(|(_, v)| v.clone());
            (config, level)
        };
        for (lab, shipped) in [
            (Runtime::Edgegate, Runtime::EdgegateInfo),
            (Runtime::EdgegateComponent, Runtime::EdgegateComponentInfo),
        ] {
            let (lab_config, lab_level) = level(lab);
            let (shipped_config, shipped_level) = level(shipped);
            assert_eq!(lab_config, shipped_config, "{}", shipped.name());
            assert_eq!(lab_level, Some("warn".into()));
            assert_eq!(shipped_level, None, "{}: the default level, as shipped", shipped.name());
            assert!(shipped.logs_access() && !lab.logs_access());
        }
        let component = |runtime: Runtime| {
            env.deploy_echo_json(runtime, 0).unwrap();
            fs::read(work.path().join(runtime.name()).join("modules/echo-json.wasm")).unwrap()
        };
        assert_eq!(
            component(Runtime::EdgegateComponent),
            component(Runtime::EdgegateComponentInfo)
        );
    }

    #[test]
    fn the_rate_limited_edgegates_are_the_lab_configuration_with_a_policy_on_every_route() {
        let plain = edgegate_config(Runtime::Edgegate);
        let routes = plain.matches("[[routes]]").count();
        for (runtime, extra) in [
            (Runtime::EdgegateRateLocal, RATE_LIMIT.to_owned()),
            (Runtime::EdgegateRateShared, RATE_LIMIT.to_owned() + RATE_LIMIT_SHARED),
        ] {
            let config = edgegate_config(runtime);
            assert_eq!(config.matches("rate_limits = [\"lab\"]").count(), routes);
            let without = config.replace("rate_limits = [\"lab\"]\n", "");
            assert_eq!(without, plain.clone() + &extra, "{}", runtime.name());
            assert!(runtime.is_edgegate() && !Runtime::ALL.contains(&runtime));
            assert_eq!(Runtime::from_name(runtime.name()), Some(runtime));
        }
    }

    fn wat_empty() -> Vec<u8> {
        b"\0asm\x01\0\0\0".to_vec()
    }
}
