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
use std::sync::Arc;
use std::time::Duration;

use edgegate_runtime::Limits;
use serde::Deserialize;

use crate::path::{EscapedSlashes, PathRules};
use crate::size::ByteSize;

mod image;
pub use image::ImageConfig;

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
    /// Upstreams by name: where a worker's forward directive sends the request.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// KV namespaces by name, each in one backend.
    #[serde(default)]
    pub kv: BTreeMap<String, KvConfig>,
    /// Workers' outbound requests to hosts that are not upstreams.
    #[serde(default)]
    pub fetch: FetchSection,
}

/// `[kv.NAME]`: a KV namespace workers can be granted (`workers.NAME.kv`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvConfig {
    /// `memory` (the default: this process, gone at exit), `redb` (a file on this node,
    /// durable) or `redis` (shared by several nodes).
    #[serde(default)]
    pub backend: KvBackend,
    /// `memory`: bytes of keys and values at most; a write past it fails. Default 64MiB.
    pub capacity: Option<ByteSize>,
    /// `redb`: the database file (relative to this file). Namespaces may share one.
    pub path: Option<PathBuf>,
    /// `redis`: `redis://[user:password@]host:port[/db]`.
    pub url: Option<String>,
    /// `redis`: the environment variable holding the URL instead (it may hold a password).
    pub url_env: Option<String>,
    /// `redis`: bound on every call (and connection attempt). Default 100ms.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
    /// `redis`: prepended to every key. Default `edgegate:NAME:`.
    pub key_prefix: Option<String>,
    /// Entries to write at start: a JSON object or NDJSON file (relative to this file), or
    /// `builtin:demo-kv` for the demo's data. Existing keys are overwritten.
    pub seed: Option<String>,
}

/// Where a namespace lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvBackend {
    /// In this process.
    #[default]
    Memory,
    /// In a redb file.
    Redb,
    /// In Redis.
    Redis,
}

/// The demo's seed data.
pub const DEMO_KV_SEED: &str = "builtin:demo-kv";

/// `[fetch]`: the pool workers' fetches to allowed hosts go through (a fetch to an upstream
/// uses that upstream's pool and timeouts).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSection {
    /// Time to connect (TCP and TLS). Default 2s.
    #[serde(deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// Time from sending to the response head. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub first_byte_timeout: Duration,
    /// Idle keep-alive connections are closed after this; a body that stalls this long is
    /// cut off. Default 60s.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Idle connections kept per host. Default 32.
    pub max_idle: usize,
    /// PEM file of the CA certificates to trust instead of the public roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for FetchSection {
    fn default() -> Self {
        Self {
            connect_timeout: default_connect_timeout(),
            first_byte_timeout: Duration::from_secs(10),
            idle_timeout: default_idle_timeout(),
            max_idle: default_max_idle(),
            ca_file: None,
        }
    }
}

/// `[server]`: listeners and the limits every request is held to before any worker runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address of the HTTP listener (HTTP/1.1 and h2c on one port). Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Address of the admin listener (`/healthz`, `/metrics`). Default `127.0.0.1:9090`.
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
    /// Time a new connection has to show it is HTTP: its first byte (HTTP/1.1), or the whole
    /// connection preface and first frame (h2c). Past it the connection is closed, so silent
    /// sockets cannot hold `max_connections`. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub handshake_timeout: Duration,
    /// Time a client has to send a request's headers, from their first byte: an HTTP/1.1
    /// request head, or an h2 header block (HEADERS to END_HEADERS). Past it the connection
    /// is closed. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is shut down: an HTTP/1.1
    /// keep-alive connection is closed, an h2 connection gets GOAWAY and is closed. A
    /// connection whose client takes no byte of its response for this long is closed.
    /// Default 60s.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// How often an h2 connection is PINGed, idle or not; `"0s"` turns the pings off.
    /// Default 30s.
    #[serde(deserialize_with = "duration")]
    pub h2_keepalive_interval: Duration,
    /// How long a PING may go unanswered before the h2 connection is closed. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub h2_keepalive_timeout: Duration,
    /// Time a client has to send a whole request body; past it, 408. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub body_read_timeout: Duration,
    /// On SIGINT or SIGTERM, how long in-flight requests may take to finish before the process
    /// exits anyway. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub shutdown_timeout: Duration,
    /// Whether clients' `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` and
    /// `Forwarded` headers are believed: set it only behind a proxy you run. By default
    /// (false) they are replaced with what this gateway saw; when true, the client's address
    /// is appended to `X-Forwarded-For` and the others are kept.
    pub trust_forwarded: bool,
    /// Add a `server-timing` header to each response with the instantiate, guest and upstream
    /// durations (docs/observability.md). Off by default: it tells clients how long the
    /// gateway's parts took.
    pub server_timing: bool,
    /// Normalize request paths before routing (RFC 3986): decode escaped unreserved
    /// characters (`%2E` is `.`), remove `.` and `..` segments, and refuse a path that climbs
    /// above the root with 400 `invalid_path`. The worker and the upstream get the normalized
    /// path. Default true; off, paths are routed and forwarded exactly as received.
    pub normalize_path: bool,
    /// With `normalize_path`, merge repeated slashes: `/a//b` is `/a/b`. Default true.
    pub merge_slashes: bool,
    /// With `normalize_path`, what an escaped slash or backslash (`%2F`, `%5C`) gets:
    /// `"reject"` (400 `invalid_path`, the default) or `"keep"` (data inside its segment,
    /// forwarded escaped).
    pub escaped_slashes: EscapedSlashes,
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
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            h2_keepalive_interval: Duration::from_secs(30),
            h2_keepalive_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
            trust_forwarded: false,
            server_timing: false,
            normalize_path: true,
            merge_slashes: true,
            escaped_slashes: EscapedSlashes::Reject,
        }
    }
}

impl ServerConfig {
    /// How request paths are normalized.
    pub fn path_rules(&self) -> PathRules {
        PathRules {
            normalize: self.normalize_path,
            merge_slashes: self.merge_slashes,
            escaped_slashes: self.escaped_slashes,
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
    /// How many image transforms run at once, process-wide. Default: the CPUs the process may
    /// run on.
    pub image_threads: usize,
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
            image_threads: runtime.image_threads,
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
    /// The upstreams the worker may forward to (by name in `[upstreams]`). Nothing is
    /// ambient: a forward to any other is refused with 500 `upstream_not_granted`.
    #[serde(default)]
    pub upstreams: Vec<String>,
    /// JWT validation: the keys the host verifies signatures with, and the token policy.
    pub jwt: Option<JwtConfig>,
    /// The KV namespaces (in `[kv]`) the worker may use; any other is `NotGranted`.
    #[serde(default)]
    pub kv: Vec<String>,
    /// The origins the worker may fetch from, `scheme://host[:port]` (`http` or `https`). It
    /// may also fetch `upstream://NAME/…` from the upstreams it is granted.
    #[serde(default)]
    pub fetch: Vec<String>,
    /// The image capability: `true` with the default limits, or a table of them. Without it
    /// the image host calls answer `NotGranted`.
    #[serde(default, deserialize_with = "image::grant")]
    pub image: Option<ImageConfig>,
}

/// `[workers.NAME.jwt]`: the worker's token policy and its keys. The keys stay in the host;
/// the policy reaches the worker as `jwt.*` configuration values (see
/// `edgegate_sdk::jwt::Validation::from_config`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// `iss` must be exactly this. Default: not checked.
    pub issuer: Option<String>,
    /// `aud` must name one of these. Default: not checked (the auth-router routes on it).
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Clock skew allowed for `exp`, `nbf` and `iat`. Default 60s.
    #[serde(default = "default_leeway", deserialize_with = "duration")]
    pub leeway: Duration,
    /// Claims that must be present. Default `["exp"]`.
    #[serde(default = "default_required_claims")]
    pub required_claims: Vec<String>,
    /// Tokens longer than this are refused before any decoding. Default 8KiB.
    #[serde(default = "default_max_token")]
    pub max_token_bytes: ByteSize,
    /// Where the keys come from; at least one.
    pub keys: Vec<KeySourceConfig>,
}

fn default_leeway() -> Duration {
    Duration::from_secs(60)
}

fn default_required_claims() -> Vec<String> {
    vec!["exp".into()]
}

fn default_max_token() -> ByteSize {
    ByteSize(8 << 10)
}

/// One `[[workers.NAME.jwt.keys]]` entry: exactly one source of keys.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySourceConfig {
    /// The key id tokens name it by (`secret_*`, `pem*`, `jwk*`; a JWKS names its own).
    pub kid: Option<String>,
    /// The one algorithm the key verifies: required for secrets and PEM keys; for JWKs, the
    /// default for keys that name none (a JWK's own `alg` must agree).
    pub alg: Option<String>,
    /// An HMAC secret: the value of this environment variable, as bytes.
    pub secret_env: Option<String>,
    /// An HMAC secret: this file's bytes (one trailing newline removed).
    pub secret_file: Option<PathBuf>,
    /// A public key in PEM (`PUBLIC KEY` or `RSA PUBLIC KEY`).
    pub pem: Option<String>,
    /// A PEM file.
    pub pem_file: Option<PathBuf>,
    /// A JWK, as JSON text.
    pub jwk: Option<String>,
    /// A file with one JWK.
    pub jwk_file: Option<PathBuf>,
    /// A file with a JWK Set.
    pub jwks_file: Option<PathBuf>,
    /// A JWK Set fetched over HTTP(S), cached and refreshed in the background.
    pub jwks_url: Option<String>,
    /// Refresh interval when the response has no cache headers. Default 5m.
    #[serde(default, deserialize_with = "optional_duration")]
    pub refresh: Option<Duration>,
    /// Never refresh more often than this, whatever the cache headers say. Default 30s.
    #[serde(default, deserialize_with = "optional_duration")]
    pub min_refresh: Option<Duration>,
    /// Never keep a fetched set longer than this without refreshing. Default 24h.
    #[serde(default, deserialize_with = "optional_duration")]
    pub max_refresh: Option<Duration>,
    /// While refreshing fails, keep using the last set this long past its expiry. Default 1h.
    #[serde(default, deserialize_with = "optional_duration")]
    pub max_stale: Option<Duration>,
    /// Time for one fetch, connection included. Default 5s.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
    /// PEM file of the CA certificates to trust for an `https` URL, instead of the public
    /// roots.
    pub ca_file: Option<PathBuf>,
}

impl KeySourceConfig {
    /// The names of the source fields that are set.
    pub(crate) fn sources(&self) -> Vec<&'static str> {
        [
            ("secret_env", self.secret_env.is_some()),
            ("secret_file", self.secret_file.is_some()),
            ("pem", self.pem.is_some()),
            ("pem_file", self.pem_file.is_some()),
            ("jwk", self.jwk.is_some()),
            ("jwk_file", self.jwk_file.is_some()),
            ("jwks_file", self.jwks_file.is_some()),
            ("jwks_url", self.jwks_url.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

/// `[upstreams.NAME]`: an HTTP service a worker can forward requests to, through a pool of
/// keep-alive connections.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `http://host:port` or `https://host:port` (no path: the request's path is kept), or
    /// `builtin:demo-origin` for the demo origin the gateway runs itself on loopback.
    pub url: String,
    /// Time to open a connection (TCP and TLS). Past it: 504. Default 2s.
    #[serde(default = "default_connect_timeout", deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// Time from sending the request to the response head. Past it: 504. Default 15s.
    #[serde(default = "default_first_byte_timeout", deserialize_with = "duration")]
    pub first_byte_timeout: Duration,
    /// How long a connection may sit idle: a pooled keep-alive connection is closed, a
    /// response body that stalls this long is cut off. Default 60s.
    #[serde(default = "default_idle_timeout", deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Idle connections kept open in the pool. Default 32.
    #[serde(default = "default_max_idle")]
    pub max_idle: usize,
    /// Send the client's `Host` instead of the upstream's authority. Default false.
    #[serde(default)]
    pub preserve_host: bool,
    /// PEM file of the CA certificates to trust for `https`, instead of the public roots.
    pub ca_file: Option<PathBuf>,
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}

fn default_first_byte_timeout() -> Duration {
    Duration::from_secs(15)
}

fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_max_idle() -> usize {
    32
}

/// The `url` of the demo origin.
pub const DEMO_ORIGIN: &str = "builtin:demo-origin";

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
    /// KV operations per request (each key of a batch counts). Default 100.
    pub kv_ops: u32,
    /// The largest value the worker may store. Default 1MiB.
    pub kv_value: ByteSize,
    /// Outbound requests per request. Default 32.
    pub subrequests: u32,
    /// The largest fetched response body. Default 1MiB.
    pub subrequest_body: ByteSize,
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
            kv_ops: l.kv_ops,
            kv_value: ByteSize(l.kv_value),
            subrequests: l.subrequests,
            subrequest_body: ByteSize(l.subrequest_body),
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
            kv_ops: l.kv_ops,
            kv_value: l.kv_value.bytes(),
            subrequests: l.subrequests,
            subrequest_body: l.subrequest_body.bytes(),
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
    /// The worker that serves the request. One of `worker` and `respond` is required.
    pub worker: Option<String>,
    /// A fixed answer the gateway gives by itself, with no worker (and without reading the
    /// request body): a health or placeholder route, or a baseline for what the gateway
    /// costs without Wasm.
    pub respond: Option<RespondConfig>,
}

/// A route's fixed answer (`respond = { status = 200, body = "ok" }`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondConfig {
    /// The status, 200 to 599. Default 200.
    #[serde(default = "RespondConfig::default_status")]
    pub status: u16,
    /// The body. Default empty.
    #[serde(default)]
    pub body: String,
    /// The `content-type`. Default `text/plain; charset=utf-8` (none for an empty body).
    pub content_type: Option<String>,
}

impl RespondConfig {
    fn default_status() -> u16 {
        200
    }
}

/// Reads a duration written like `"2ms"`, `"1s 500ms"` or `"1m"` (humantime's syntax), and
/// says what is wrong with one that is not.
fn duration<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text)
        .map_err(|e| serde::de::Error::custom(format!("invalid duration `{text}`: {e}")))
}

fn optional_duration<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    duration(deserializer).map(Some)
}

/// A configuration error, naming where it is. When it comes from another error (a file that
/// cannot be read, a key that does not parse), its message is that error's, and its
/// [`source`](std::error::Error::source) is that error's cause, so `edgegate check` and the
/// logs print the whole chain.
#[derive(Debug, Clone)]
pub struct ConfigError {
    /// The file, or a description like `<built-in demo>`.
    pub file: String,
    /// The key path, e.g. `workers.echo.limits.cpu`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// The error this one reports, whose causes follow it in the chain.
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
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

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_deref()?.source()
    }
}

impl ConfigError {
    /// A problem at `key`, told in `message`.
    pub(crate) fn at(file: &str, key: impl Into<String>, message: impl fmt::Display) -> Self {
        Self {
            file: file.to_owned(),
            key: Some(key.into()),
            message: message.to_string(),
            position: None,
            error: None,
        }
    }

    /// `error`, found at `key`: its text is the message, its causes follow.
    pub(crate) fn caused(
        file: &str,
        key: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        let error: Arc<dyn std::error::Error + Send + Sync> = Arc::from(error.into());
        Self {
            file: file.to_owned(),
            key: Some(key.into()),
            message: error.to_string(),
            position: None,
            error: Some(error),
        }
    }

    /// One error for several: itself when there is one, else one that lists them all, a line
    /// each (`2 errors:` then `  workers.a.module: …`).
    pub(crate) fn all(file: &str, mut errors: Vec<ConfigError>) -> Self {
        if errors.len() == 1 {
            return errors.remove(0);
        }
        let mut message = format!("{} errors:", errors.len());
        for error in errors {
            message.push_str("\n  ");
            if error.file != file {
                message.push_str(&error.file);
                message.push_str(": ");
            }
            if let Some(key) = &error.key {
                message.push_str(key);
                message.push_str(": ");
            }
            message.push_str(&error.message);
            let mut cause = std::error::Error::source(&error);
            while let Some(error) = cause {
                message.push_str(": ");
                message.push_str(&error.to_string());
                cause = error.source();
            }
        }
        Self { file: file.to_owned(), key: None, message, position: None, error: None }
    }
}

/// A configuration file that cannot be read: the I/O error is its cause.
#[derive(Debug, thiserror::Error)]
#[error("cannot read it")]
struct Unreadable(#[source] std::io::Error);

/// A parsed configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its file name (or description), for error messages.
    pub origin: String,
    /// The directory relative paths are resolved against.
    pub base_dir: PathBuf,
    /// Values for environment variables that are not set (the demo's secret).
    pub env_defaults: BTreeMap<String, String>,
}

impl Loaded {
    /// Reads and checks a configuration file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: origin.clone(),
            key: None,
            message: "cannot read it".into(),
            position: None,
            error: Some(Arc::new(Unreadable(e))),
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_text(&text, &origin, base_dir)
    }

    /// Parses and checks configuration text.
    pub fn from_text(text: &str, origin: &str, base_dir: PathBuf) -> Result<Self, ConfigError> {
        let config = parse(text, origin)?;
        validate(&config, origin)?;
        Ok(Self { config, origin: origin.to_owned(), base_dir, env_defaults: BTreeMap::new() })
    }

    /// An environment variable, or its default from [`Loaded::env_defaults`].
    pub fn env_var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().or_else(|| self.env_defaults.get(name).cloned())
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
        error: None,
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
    for (key, timeout) in [
        ("handshake_timeout", s.handshake_timeout),
        ("header_read_timeout", s.header_read_timeout),
        ("idle_timeout", s.idle_timeout),
        ("h2_keepalive_timeout", s.h2_keepalive_timeout),
    ] {
        if timeout.is_zero() {
            return at(format!("server.{key}"), "must be longer than zero");
        }
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
        for (i, upstream) in worker.upstreams.iter().enumerate() {
            if !config.upstreams.contains_key(upstream) {
                return Err(ConfigError::at(
                    file,
                    format!("workers.{name}.upstreams[{i}]"),
                    format!("no upstream named `{upstream}` in [upstreams]"),
                ));
            }
        }
        for (i, ns) in worker.kv.iter().enumerate() {
            if !config.kv.contains_key(ns) {
                return Err(ConfigError::at(
                    file,
                    format!("workers.{name}.kv[{i}]"),
                    format!("no KV namespace named `{ns}` in [kv]"),
                ));
            }
        }
        for (i, origin) in worker.fetch.iter().enumerate() {
            if let Err(error) = crate::fetch::Origin::parse(origin) {
                return Err(ConfigError::caused(file, format!("workers.{name}.fetch[{i}]"), error));
            }
        }
        if let Some(jwt) = &worker.jwt {
            validate_jwt(jwt, &format!("workers.{name}.jwt"), file)?;
            if let Some(key) = worker.config.keys().find(|k| k.starts_with("jwt.")) {
                return Err(ConfigError::at(
                    file,
                    format!("workers.{name}.config.{key}"),
                    "`jwt.*` values come from [workers.NAME.jwt]; set them there",
                ));
            }
        }
    }
    for (name, kv) in &config.kv {
        validate_kv(kv, &format!("kv.{name}"), file)?;
    }
    for (name, upstream) in &config.upstreams {
        validate_upstream(upstream, &format!("upstreams.{name}"), file)?;
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
        match (&route.worker, &route.respond) {
            (Some(_), Some(_)) | (None, None) => {
                return at(format!("routes[{i}]"), "needs exactly one of `worker` and `respond`");
            }
            (Some(worker), None) if !config.workers.contains_key(worker) => {
                return Err(ConfigError::at(
                    file,
                    key("worker"),
                    format!("no worker named `{worker}` in [workers]"),
                ));
            }
            (None, Some(respond)) if !(200..=599).contains(&respond.status) => {
                return at(key("respond.status"), "must be 200 to 599");
            }
            (None, Some(respond))
                if respond
                    .content_type
                    .as_ref()
                    .is_some_and(|t| http::HeaderValue::from_str(t).is_err()) =>
            {
                return at(key("respond.content_type"), "is not a valid header value");
            }
            _ => {}
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

fn validate_kv(kv: &KvConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    let error =
        |key: &str, message: &str| Err(ConfigError::at(file, format!("{at}.{key}"), message));
    let fields = [
        ("capacity", kv.capacity.is_some(), KvBackend::Memory),
        ("path", kv.path.is_some(), KvBackend::Redb),
        ("url", kv.url.is_some(), KvBackend::Redis),
        ("url_env", kv.url_env.is_some(), KvBackend::Redis),
        ("timeout", kv.timeout.is_some(), KvBackend::Redis),
        ("key_prefix", kv.key_prefix.is_some(), KvBackend::Redis),
    ];
    if let Some((field, _, backend)) = fields.iter().find(|(_, set, b)| *set && *b != kv.backend) {
        let backend = format!("{backend:?}").to_lowercase();
        return error(field, &format!("is only for backend = \"{backend}\""));
    }
    match kv.backend {
        KvBackend::Redb if kv.path.is_none() => {
            error("path", "is required with backend = \"redb\"")
        }
        KvBackend::Redis if kv.url.is_some() == kv.url_env.is_some() => {
            error("url", "backend = \"redis\" needs exactly one of `url` and `url_env`")
        }
        _ if kv.timeout.is_some_and(|t| t.is_zero()) => {
            error("timeout", "must be longer than zero")
        }
        _ => Ok(()),
    }
}

fn validate_jwt(jwt: &JwtConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    let error = |key: String, message: String| Err(ConfigError::at(file, key, message));
    if jwt.keys.is_empty() {
        return error(format!("{at}.keys"), "needs at least one source of keys".into());
    }
    for (name, list) in [("audiences", &jwt.audiences), ("required_claims", &jwt.required_claims)] {
        if let Some(bad) = list.iter().find(|v| v.is_empty() || v.contains(',')) {
            return error(
                format!("{at}.{name}"),
                format!("`{bad}` cannot be empty or hold a comma"),
            );
        }
    }
    if jwt.max_token_bytes.bytes() < 64 {
        return error(format!("{at}.max_token_bytes"), "must be at least 64B".into());
    }
    for (i, source) in jwt.keys.iter().enumerate() {
        let key = format!("{at}.keys[{i}]");
        let sources = source.sources();
        let [kind] = sources[..] else {
            return error(
                key,
                format!(
                    "needs exactly one of secret_env, secret_file, pem, pem_file, jwk, jwk_file, \
                     jwks_file, jwks_url (found {})",
                    if sources.is_empty() { "none".into() } else { sources.join(", ") }
                ),
            );
        };
        if let Some(alg) = &source.alg
            && edgegate_runtime::keys::Alg::from_name(alg).is_none()
        {
            return error(
                format!("{key}.alg"),
                format!("`{alg}` is not one of HS256, HS384, HS512, RS256, PS256, ES256, EdDSA"),
            );
        }
        let needs_alg = matches!(kind, "secret_env" | "secret_file" | "pem" | "pem_file");
        if needs_alg && source.alg.is_none() {
            return error(format!("{key}.alg"), format!("is required with {kind}"));
        }
        if matches!(kind, "jwks_file" | "jwks_url") && source.kid.is_some() {
            return error(format!("{key}.kid"), "a JWK Set names its own keys".into());
        }
        let refresh_fields = [
            ("refresh", source.refresh.is_some()),
            ("min_refresh", source.min_refresh.is_some()),
            ("max_refresh", source.max_refresh.is_some()),
            ("max_stale", source.max_stale.is_some()),
            ("timeout", source.timeout.is_some()),
            ("ca_file", source.ca_file.is_some()),
        ];
        if kind != "jwks_url"
            && let Some((field, _)) = refresh_fields.iter().find(|(_, set)| *set)
        {
            return error(format!("{key}.{field}"), "only applies to jwks_url".into());
        }
        if let Some(url) = &source.jwks_url {
            let uri: Result<http::Uri, _> = url.parse();
            if !uri.as_ref().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
            }) {
                return error(format!("{key}.jwks_url"), format!("`{url}` is not an http(s) URL"));
            }
        }
    }
    Ok(())
}

fn validate_upstream(upstream: &UpstreamConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    if upstream.url == DEMO_ORIGIN {
        return Ok(());
    }
    let bad = |message: String| Err(ConfigError::at(file, format!("{at}.url"), message));
    let Ok(uri) = upstream.url.parse::<http::Uri>() else {
        return bad(format!("`{}` is not a URL", upstream.url));
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return bad(format!(
            "`{}` must be http://host:port, https://host:port or {DEMO_ORIGIN}",
            upstream.url
        ));
    }
    if uri.path_and_query().is_some_and(|pq| pq.as_str() != "/") {
        return bad(format!("`{}` must not have a path: the request's path is kept", upstream.url));
    }
    if upstream.ca_file.is_some() && uri.scheme_str() != Some("https") {
        return Err(ConfigError::at(file, format!("{at}.ca_file"), "only applies to https"));
    }
    if upstream.connect_timeout.is_zero() || upstream.first_byte_timeout.is_zero() {
        return Err(ConfigError::at(file, at.to_owned(), "timeouts must be longer than zero"));
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
        assert_eq!(key("[[routes]]\npath = \"/\"\n".into()), "routes[0]");
        assert_eq!(key(route("path = \"/a\"\nrespond = {}")), "routes[0]");
        let respond = |r: &str| format!("[[routes]]\npath = \"/\"\nrespond = {{ {r} }}\n");
        assert_eq!(key(respond("status = 101")), "routes[0].respond.status");
        assert_eq!(key(respond("content_type = \"a\\nb\"")), "routes[0].respond.content_type");
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

    const AUTH: &str = r#"
        [upstreams.api]
        url = "http://127.0.0.1:9001"
        first_byte_timeout = "2s"

        [workers.auth]
        module = "builtin:auth-router"
        upstreams = ["api"]

        [workers.auth.jwt]
        issuer = "https://id.example"
        leeway = "30s"

        [[workers.auth.jwt.keys]]
        kid = "k1"
        alg = "HS256"
        secret_env = "SECRET"

        [[workers.auth.jwt.keys]]
        jwks_url = "https://id.example/.well-known/jwks.json"
        max_stale = "10m"
    "#;

    #[test]
    fn upstreams_grants_and_jwt_parse_with_defaults() {
        let c = load(AUTH).unwrap();
        let api = &c.upstreams["api"];
        assert_eq!(api.first_byte_timeout, Duration::from_secs(2));
        assert_eq!(api.connect_timeout, Duration::from_secs(2), "default");
        assert_eq!(api.max_idle, 32);
        let w = &c.workers["auth"];
        assert_eq!(w.upstreams, ["api"]);
        let jwt = w.jwt.as_ref().unwrap();
        assert_eq!(jwt.leeway, Duration::from_secs(30));
        assert_eq!(jwt.required_claims, ["exp"], "default");
        assert_eq!(jwt.max_token_bytes, ByteSize(8192));
        assert_eq!(jwt.keys[0].sources(), ["secret_env"]);
        assert_eq!(jwt.keys[1].max_stale, Some(Duration::from_secs(600)));
        assert!(!c.server.trust_forwarded);
    }

    #[test]
    fn upstream_and_jwt_mistakes_are_named() {
        let key = |text: String| error(&text).key.unwrap();
        let auth = |replace: &str, with: &str| AUTH.replace(replace, with);
        assert_eq!(
            key(auth(r#"upstreams = ["api"]"#, r#"upstreams = ["nope"]"#)),
            "workers.auth.upstreams[0]"
        );
        assert_eq!(key(auth("http://127.0.0.1:9001", "ftp://x")), "upstreams.api.url");
        assert_eq!(key(auth("http://127.0.0.1:9001", "http://x:1/base")), "upstreams.api.url");
        assert_eq!(key(auth("http://127.0.0.1:9001", "not a url")), "upstreams.api.url");
        assert_eq!(
            key(auth(r#"alg = "HS256""#, r#"alg = "none""#)),
            "workers.auth.jwt.keys[0].alg"
        );
        assert_eq!(key(auth(r#"alg = "HS256""#, "")), "workers.auth.jwt.keys[0].alg");
        assert_eq!(
            key(auth(r#"secret_env = "SECRET""#, "secret_env = \"S\"\npem = \"x\"")),
            "workers.auth.jwt.keys[0]"
        );
        assert_eq!(key(auth(r#"secret_env = "SECRET""#, "")), "workers.auth.jwt.keys[0]");
        assert_eq!(
            key(auth(r#"max_stale = "10m""#, r#"kid = "x""#)),
            "workers.auth.jwt.keys[1].kid"
        );
        assert_eq!(
            key(auth(r#"secret_env = "SECRET""#, "secret_env = \"S\"\nrefresh = \"1m\"")),
            "workers.auth.jwt.keys[0].refresh"
        );
        assert_eq!(
            key(auth("https://id.example/.well-known", "id.example/")),
            "workers.auth.jwt.keys[1].jwks_url"
        );
        assert_eq!(key(auth(r#"leeway = "30s""#, r#"leeway = "soon""#)), "workers.auth.jwt.leeway");
        assert_eq!(key(auth(r#"leeway = "30s""#, "bogus = 1")), "workers.auth.jwt.bogus");
        assert_eq!(
            key(auth(
                r#"upstreams = ["api"]"#,
                "upstreams = [\"api\"]\nconfig = { \"jwt.issuer\" = \"x\" }"
            )),
            "workers.auth.config.jwt.issuer"
        );
    }

    #[test]
    fn env_defaults_fill_only_unset_variables() {
        let mut loaded = Loaded::from_text("", "t", PathBuf::new()).unwrap();
        loaded.env_defaults.insert("EDGEGATE_TEST_UNSET_VAR".into(), "fallback".into());
        loaded.env_defaults.insert("PATH".into(), "fallback".into());
        assert_eq!(loaded.env_var("EDGEGATE_TEST_UNSET_VAR").as_deref(), Some("fallback"));
        assert_ne!(loaded.env_var("PATH").as_deref(), Some("fallback"), "the real one wins");
        assert_eq!(loaded.env_var("EDGEGATE_TEST_OTHER_UNSET"), None);
    }
}
