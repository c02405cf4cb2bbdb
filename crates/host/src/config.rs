//! The configuration file (`edgegate.toml`): what is served where, and within which limits.
//!
//! Every table rejects unknown keys, durations are written like `"2ms"` or `"30s"`, sizes like
//! `"2MiB"`. An error names the file, the key and the problem:
//!
//! ```text
//! edgegate.toml: workers.echo.limits.cpu: invalid duration `2 parsecs`: unknown time unit "parsecs", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations) (line 9, column 7)
//! ```
//!
//! `docs/configuration.md` documents every key; the types here carry the same text.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgegate_runtime::Limits;
use serde::Deserialize;

use crate::size::ByteSize;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Listeners and server-wide HTTP limits.
    #[serde(default)]
    pub server: ServerConfig,
    /// The Wasm runtime.
    #[serde(default)]
    pub runtime: RuntimeSection,
    /// Workers by name.
    #[serde(default)]
    pub workers: BTreeMap<String, WorkerConfig>,
    /// Routes, matched as described in [`crate::router`].
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// `[server]`: listeners and the limits every request is held to before any worker runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address of the HTTP listener (HTTP/1.1 and h2c on one port). Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Address of the admin listener (`/healthz`). Default `127.0.0.1:9090`.
    pub admin: SocketAddr,
    /// Open client connections at most; past it, new connections wait in the kernel's accept
    /// queue. Default 4096.
    pub max_connections: usize,
    /// Requests running a worker at once, and the size of the instance pool. Past it, a request
    /// waits up to `queue_timeout`, then gets 503 with `Retry-After`. Default 256.
    pub max_concurrency: u32,
    /// How long a request may wait for a concurrency slot. Default 50ms.
    #[serde(deserialize_with = "duration")]
    pub queue_timeout: Duration,
    /// Request headers at most; more gets 431. Default 100.
    pub max_headers: usize,
    /// Bytes of request line and headers at most (at least 8KiB); more gets 431. Default 16KiB.
    pub max_header_bytes: ByteSize,
    /// Request body bytes at most, for every route; more gets 413. A worker's own
    /// `request_body` limit can only lower it. Default 16MiB.
    pub max_request_body: ByteSize,
    /// Time a client has to send a request's headers, from the first byte; past it the
    /// connection is closed. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub header_read_timeout: Duration,
    /// Time a client has to send a whole request body; past it, 408. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub body_read_timeout: Duration,
    /// On SIGINT or SIGTERM, how long in-flight requests may take to finish before the process
    /// exits anyway. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub shutdown_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin: SocketAddr::from(([127, 0, 0, 1], 9090)),
            max_connections: 4096,
            max_concurrency: 256,
            queue_timeout: Duration::from_millis(50),
            max_headers: 100,
            max_header_bytes: ByteSize(16 << 10),
            max_request_body: ByteSize(16 << 20),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// `[runtime]`: the Wasm engine.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSection {
    /// Keep compiled modules on disk so they are compiled once. Default true.
    pub cache: bool,
    /// Where (relative to this file). Default `$XDG_CACHE_HOME/edgegate/modules`, else
    /// `~/.cache/edgegate/modules`.
    pub cache_dir: Option<PathBuf>,
    /// How often running guests are checked against their CPU budget and deadline. Default 1ms.
    #[serde(deserialize_with = "duration")]
    pub epoch_tick: Duration,
    /// The largest memory limit any worker may have; sizes the instance pool's address space.
    /// Default 128MiB.
    pub max_worker_memory: ByteSize,
    /// Native stack for guest code; deeper recursion traps. Default 512KiB.
    pub max_wasm_stack: ByteSize,
}

impl Default for RuntimeSection {
    fn default() -> Self {
        let runtime = edgegate_runtime::RuntimeConfig::default();
        Self {
            cache: true,
            cache_dir: None,
            epoch_tick: runtime.epoch_tick,
            max_worker_memory: ByteSize(runtime.max_memory),
            max_wasm_stack: ByteSize(runtime.max_wasm_stack as u64),
        }
    }
}

/// `[workers.NAME]`: a module and what it may use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// A `.wasm` file (relative to this file), or `builtin:NAME` for a worker bundled in the
    /// binary.
    pub module: String,
    /// Per-request limits.
    #[serde(default)]
    pub limits: WorkerLimits,
    /// String values the worker reads with `config_get`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// `[workers.NAME.limits]`: see `edgegate_runtime::Limits` for what each bounds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerLimits {
    /// Linear memory. Default 2MiB.
    pub memory: ByteSize,
    /// CPU time per request. Default 2ms.
    #[serde(deserialize_with = "duration")]
    pub cpu: Duration,
    /// Wall-clock time per request. Default 1s.
    #[serde(deserialize_with = "duration")]
    pub deadline: Duration,
    /// Request body. Default 1MiB.
    pub request_body: ByteSize,
    /// Response body. Default 1MiB.
    pub response_body: ByteSize,
    /// Host calls per request. Default 1000.
    pub hostcalls: u32,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        let l = Limits::default();
        Self {
            memory: ByteSize(l.memory),
            cpu: l.cpu,
            deadline: l.deadline,
            request_body: ByteSize(l.request_body),
            response_body: ByteSize(l.response_body),
            hostcalls: l.hostcalls,
        }
    }
}

impl From<&WorkerLimits> for Limits {
    fn from(l: &WorkerLimits) -> Self {
        Limits {
            memory: l.memory.bytes(),
            cpu: l.cpu,
            deadline: l.deadline,
            request_body: l.request_body.bytes(),
            response_body: l.response_body.bytes(),
            hostcalls: l.hostcalls,
        }
    }
}

/// `[[routes]]`: which requests go to which worker.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A name for logs. Default `routes[N]`.
    pub name: Option<String>,
    /// Match only this host (case-insensitive; the port is ignored unless given here).
    pub host: Option<String>,
    /// Match exactly this path. One of `path` and `prefix` is required.
    pub path: Option<String>,
    /// Match this path and everything below it, segment-wise: `/api` matches `/api` and
    /// `/api/x`, not `/apix`; a prefix ending in `/` matches anything that starts with it.
    pub prefix: Option<String>,
    /// Match only these methods (upper case). Default: any.
    #[serde(default)]
    pub methods: Vec<String>,
    /// The worker that serves the request.
    pub worker: String,
}

/// Reads a duration written like `"2ms"`, `"1s 500ms"` or `"1m"` (humantime's syntax), and
/// says what is wrong with one that is not.
fn duration<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text)
        .map_err(|e| serde::de::Error::custom(format!("invalid duration `{text}`: {e}")))
}

/// A configuration error, naming where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, or a description like `<built-in demo>`.
    pub file: String,
    /// The key path, e.g. `workers.echo.limits.cpu`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub(crate) fn at(file: &str, key: impl Into<String>, message: impl fmt::Display) -> Self {
        Self {
            file: file.to_owned(),
            key: Some(key.into()),
            message: message.to_string(),
            position: None,
        }
    }
}

/// A parsed configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its file name (or description), for error messages.
    pub origin: String,
    /// The directory relative paths are resolved against.
    pub base_dir: PathBuf,
}

impl Loaded {
    /// Reads and checks a configuration file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: origin.clone(),
            key: None,
            message: format!("cannot read: {e}"),
            position: None,
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_text(&text, &origin, base_dir)
    }

    /// Parses and checks configuration text.
    pub fn from_text(text: &str, origin: &str, base_dir: PathBuf) -> Result<Self, ConfigError> {
        let config = parse(text, origin)?;
        validate(&config, origin)?;
        Ok(Self { config, origin: origin.to_owned(), base_dir })
    }

    /// Resolves a path from the file against its directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() { path.to_path_buf() } else { self.base_dir.join(path) }
    }
}

fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let error = |key: Option<String>, e: &toml::de::Error| ConfigError {
        file: origin.to_owned(),
        key,
        message: e.message().trim_end().to_owned(),
        position: e.span().map(|span| line_column(text, span.start)),
    };
    let deserializer = toml::de::Deserializer::parse(text).map_err(|e| error(None, &e))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let key = (key != ".").then_some(key);
        error(key, e.inner())
    })
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, column)
}

/// Checks what the types alone cannot.
fn validate(config: &Config, file: &str) -> Result<(), ConfigError> {
    let at = |key: String, message: &str| Err(ConfigError::at(file, key, message));
    let s = &config.server;
    if s.max_concurrency == 0 {
        return at("server.max_concurrency".into(), "must be at least 1");
    }
    if s.max_connections == 0 {
        return at("server.max_connections".into(), "must be at least 1");
    }
    if s.max_header_bytes.bytes() < 8192 {
        return at("server.max_header_bytes".into(), "must be at least 8KiB");
    }
    if config.runtime.epoch_tick.is_zero() {
        return at("runtime.epoch_tick".into(), "must be longer than zero");
    }
    for (name, worker) in &config.workers {
        let key = |field: &str| format!("workers.{name}.limits.{field}");
        let l = &worker.limits;
        if l.memory.bytes() < 65536 {
            return at(key("memory"), "must be at least 64KiB (one Wasm page)");
        }
        if l.memory > config.runtime.max_worker_memory {
            return Err(ConfigError::at(
                file,
                key("memory"),
                format!(
                    "{} is more than runtime.max_worker_memory ({})",
                    l.memory, config.runtime.max_worker_memory
                ),
            ));
        }
        if l.cpu.is_zero() {
            return at(key("cpu"), "must be longer than zero");
        }
        if l.deadline.is_zero() {
            return at(key("deadline"), "must be longer than zero");
        }
        if worker.module.trim().is_empty() {
            return at(format!("workers.{name}.module"), "must name a .wasm file or builtin:NAME");
        }
    }
    for (i, route) in config.routes.iter().enumerate() {
        let key = |field: &str| format!("routes[{i}].{field}");
        match (&route.path, &route.prefix) {
            (Some(_), Some(_)) | (None, None) => {
                return at(format!("routes[{i}]"), "needs exactly one of `path` and `prefix`");
            }
            (Some(p), None) | (None, Some(p)) if !p.starts_with('/') => {
                let field = if route.path.is_some() { "path" } else { "prefix" };
                return at(key(field), "must start with `/`");
            }
            _ => {}
        }
        if !config.workers.contains_key(&route.worker) {
            return Err(ConfigError::at(
                file,
                key("worker"),
                format!("no worker named `{}` in [workers]", route.worker),
            ));
        }
        for method in &route.methods {
            if http::Method::from_bytes(method.as_bytes()).is_err() {
                return Err(ConfigError::at(
                    file,
                    key("methods"),
                    format!("`{method}` is not a method"),
                ));
            }
            if method.to_ascii_uppercase() != *method {
                return Err(ConfigError::at(
                    file,
                    key("methods"),
                    format!("`{method}` must be upper case (methods are case-sensitive)"),
                ));
            }
        }
        if let Some(host) = &route.host
            && (host.is_empty() || host.contains('/'))
        {
            return at(key("host"), "must be a host name, optionally with a port");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Loaded::from_text(text, "test.toml", PathBuf::new()).map(|l| l.config)
    }

    const GOOD: &str = r#"
        [server]
        listen = "127.0.0.1:0"
        queue_timeout = "10ms"
        max_request_body = "2MiB"

        [workers.echo]
        module = "builtin:echo-json"
        limits = { cpu = "5ms", memory = "4MiB" }
        config = { greeting = "hi" }

        [[routes]]
        path = "/echo"
        methods = ["POST"]
        worker = "echo"
    "#;

    #[test]
    fn a_good_config_parses_with_defaults_filled_in() {
        let c = load(GOOD).unwrap();
        assert_eq!(c.server.listen.port(), 0);
        assert_eq!(c.server.queue_timeout, Duration::from_millis(10));
        assert_eq!(c.server.max_request_body, ByteSize(2 << 20));
        assert_eq!(c.server.max_headers, 100);
        let w = &c.workers["echo"];
        assert_eq!(w.limits.cpu, Duration::from_millis(5));
        assert_eq!(w.limits.memory, ByteSize(4 << 20));
        assert_eq!(w.limits.hostcalls, 1000, "unset limits keep their defaults");
        assert_eq!(w.config["greeting"], "hi");
        assert_eq!(c.routes[0].methods, ["POST"]);
    }

    #[test]
    fn an_empty_file_is_a_valid_config() {
        let c = load("").unwrap();
        assert!(c.routes.is_empty());
        assert_eq!(c.server.admin.port(), 9090);
    }

    fn error(text: &str) -> ConfigError {
        load(text).unwrap_err()
    }

    #[test]
    fn unknown_keys_are_named_with_their_path() {
        let e = error("[server]\nlisten = \"127.0.0.1:1\"\nbogus = 1\n");
        assert_eq!(e.key.as_deref(), Some("server.bogus"), "{e}");
        assert_eq!(e.position.map(|p| p.0), Some(3));
        let e = error("[workers.w]\nmodule = \"x.wasm\"\nlimits = { cpus = \"1ms\" }\n");
        assert_eq!(e.key.as_deref(), Some("workers.w.limits.cpus"), "{e}");
    }

    #[test]
    fn bad_values_are_named_with_their_path() {
        let e =
            error("[workers.w]\nmodule = \"x.wasm\"\n[workers.w.limits]\ncpu = \"2 parsecs\"\n");
        assert_eq!(e.key.as_deref(), Some("workers.w.limits.cpu"), "{e}");
        assert_eq!(e.position, Some((4, 7)));
        let e = error("[server]\nmax_request_body = \"lots\"\n");
        assert_eq!(e.key.as_deref(), Some("server.max_request_body"), "{e}");
        let e = error("[server]\nlisten = \"localhost\"\n");
        assert_eq!(e.key.as_deref(), Some("server.listen"), "{e}");
        let e = error("[server\n");
        assert_eq!(e.key, None);
        assert!(e.position.is_some());
    }

    #[test]
    fn semantic_errors_are_named_with_their_path() {
        let route = |extra: &str| {
            format!("[workers.w]\nmodule = \"m.wasm\"\n[[routes]]\nworker = \"w\"\n{extra}\n")
        };
        let key = |text: String| error(&text).key.unwrap();
        assert_eq!(key(route("")), "routes[0]");
        assert_eq!(key(route("path = \"/a\"\nprefix = \"/b\"")), "routes[0]");
        assert_eq!(key(route("path = \"a\"")), "routes[0].path");
        assert_eq!(key(route("prefix = \"/a\"\nmethods = [\"get\"]")), "routes[0].methods");
        assert_eq!(key(route("prefix = \"/a\"\nmethods = [\"G T\"]")), "routes[0].methods");
        assert_eq!(
            key("[[routes]]\npath = \"/\"\nworker = \"missing\"\n".into()),
            "routes[0].worker"
        );
        assert_eq!(
            key("[workers.w]\nmodule = \"m\"\nlimits.memory = \"1GiB\"\n".into()),
            "workers.w.limits.memory"
        );
        assert_eq!(
            key("[workers.w]\nmodule = \"m\"\nlimits.cpu = \"0s\"\n".into()),
            "workers.w.limits.cpu"
        );
        assert_eq!(key("[server]\nmax_header_bytes = 100\n".into()), "server.max_header_bytes");
    }

    #[test]
    fn the_message_names_file_key_and_problem() {
        let e = error("[workers.w]\nmodule = \"x.wasm\"\nlimits.cpu = \"soon\"\n");
        let text = e.to_string();
        assert!(text.starts_with("test.toml: workers.w.limits.cpu: "), "{text}");
        assert!(text.contains("line 3"), "{text}");
    }
}
