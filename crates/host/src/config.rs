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
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use edgegate_runtime::units::duration;
use serde::Deserialize;

use crate::route::host_pattern::HostPattern;
use crate::route::ownership::Claims;

pub(crate) mod deploy;
mod deployed;
mod error;
mod fetch;
pub(crate) mod grants;
mod identity;
mod image;
mod jwt;
mod kv;
mod owner;
mod rate_limit;
pub(crate) mod redis;
mod registry;
mod route;
mod runtime;
mod server;
mod split;
pub(crate) mod tenant;
mod tls;
pub(crate) mod token;
mod upstream;
mod worker;

pub use deploy::{DeployConfig, Deployed, Stored};
pub use error::ConfigError;
use error::Unreadable;
pub use fetch::FetchConfig;
pub use grants::{Caps, Grants};
pub use identity::IdentityConfig;
pub use image::ImageConfig;
pub use jwt::{JwtConfig, KeySourceConfig};
pub use kv::{DEMO_KV_SEED, KvBackend, KvConfig};
pub use owner::{Owner, valid_name};
pub use rate_limit::{KeyPart, OnError, RateLimitConfig, Scope};
pub use registry::RegistryConfig;
pub use route::{RespondConfig, RouteConfig};
pub use runtime::{EngineConfig, MemoryInit};
pub use server::{ClientAddressHeader, Scheduler, ServerConfig};
pub use split::{ShadowConfig, SplitConfig, SplitRuleConfig, SplitTargetConfig, StickyConfig};
pub use tenant::TenantConfig;
pub use tls::{CertificateConfig, ClientAuthConfig, TlsConfig, TlsVersion};
pub use upstream::{DEMO_ORIGIN, UpstreamConfig};
pub use worker::{WorkerConfig, WorkerLimits};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Listeners and server-wide HTTP limits.
    #[serde(default)]
    pub server: ServerConfig,
    /// The Wasm runtime.
    #[serde(default)]
    pub runtime: EngineConfig,
    /// Workers by name.
    #[serde(default)]
    pub workers: BTreeMap<String, WorkerConfig>,
    /// Routes, matched as described in [`crate::route::router`].
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
    pub fetch: FetchConfig,
    /// The workers the admin API deploys, and what the admin token may ask for there.
    #[serde(default)]
    pub deploy: DeployConfig,
    /// The teams that deploy workers with tokens of their own, each within its hosts,
    /// prefixes, grants and caps. Shared, not copied, by the configurations a deploy
    /// assembles: ten thousand tenants are read once per file.
    #[serde(default, deserialize_with = "shared")]
    pub tenants: Arc<BTreeMap<String, TenantConfig>>,
    /// Rate-limit policies by name, which routes name (`rate_limits = [...]`).
    #[serde(default)]
    pub rate_limits: BTreeMap<String, RateLimitConfig>,
    /// How workers named `oci://…` are pulled.
    #[serde(default)]
    pub registry: RegistryConfig,
}

/// The prefix of a module that is bundled into the binary: `builtin:echo-json`.
pub(crate) const BUILTIN_PREFIX: &str = "builtin:";

/// Whether a worker's `module` names a file, not a worker built into the binary (`builtin:`)
/// or one in a registry (`oci://`).
pub(crate) fn names_a_file(module: &str) -> bool {
    ![BUILTIN_PREFIX, crate::registry::SCHEME].iter().any(|prefix| module.starts_with(prefix))
}

fn shared<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Arc<T>, D::Error> {
    T::deserialize(deserializer).map(Arc::new)
}

fn optional_duration<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    duration(deserializer).map(Some)
}

/// A parsed configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its file name, or what stands for one (the built-in demo), as errors name it.
    pub file: String,
    /// The directory relative paths are resolved against.
    pub base_dir: PathBuf,
    /// Values for environment variables that are not set (the demo's secret).
    pub env_defaults: BTreeMap<String, String>,
    /// The file it was read from, which a reload reads again; `None` for text given whole
    /// (the built-in demo), which a reload parses again as it is.
    pub path: Option<PathBuf>,
    /// The text, for a reload of a configuration that has no file.
    text: Arc<str>,
    /// The file's configuration, before the deployed workers were merged in.
    main: Arc<Config>,
    /// Who owns which traffic by the file alone: its routes and its tenants'.
    claims: Arc<Claims<Owner>>,
    /// The hosts tenants own, which keep tables of their own in the router.
    reserved: Arc<[HostPattern]>,
    /// The workers the admin API deployed (`[deploy] dir`), by the name each is served under:
    /// merged into [`Loaded::config`].
    pub deployed: Arc<BTreeMap<String, Stored>>,
}

impl Loaded {
    /// Reads and checks a configuration file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            key: None,
            message: "cannot read it".into(),
            position: None,
            error: Some(Arc::new(Unreadable(e))),
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut loaded = Self::from_text(&text, &file, base_dir)?;
        loaded.path = Some(path.to_owned());
        Ok(loaded)
    }

    /// What a reload would serve: the file read and checked again (or the same text parsed
    /// again), keeping the environment defaults.
    pub fn reread(&self) -> Result<Self, ConfigError> {
        let mut loaded = match &self.path {
            Some(path) => Self::from_file(path)?,
            None => Self::from_text(&self.text, &self.file, self.base_dir.clone())?,
        };
        loaded.env_defaults = self.env_defaults.clone();
        Ok(loaded)
    }

    /// Parses and checks configuration text, with the workers deployed in its `[deploy]
    /// dir`.
    pub fn from_text(text: &str, file: &str, base_dir: PathBuf) -> Result<Self, ConfigError> {
        let main: Arc<Config> = Arc::new(parse_as(text, file)?);
        if let Some(name) = main.workers.keys().find(|name| name.contains('/')) {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}"),
                "a worker's name has no `/`: it separates a tenant's name from its workers'",
            ));
        }
        // What depends on the file alone is checked once per file, not at each deploy.
        grants::validate(&main.deploy.grants, &main.deploy.caps, "deploy", &main, file)?;
        for (name, tenant) in main.tenants.iter() {
            tenant::validate(name, tenant, &main, file)?;
        }
        let claims = Arc::new(tenant::claims(&main, file)?);
        let reserved = tenant::reserved_hosts(&main).into();
        let deployed = match main.deploy.resolved_dir(&base_dir) {
            Some(dir) => deploy::read_dir(&dir, &main.tenants)?,
            None => BTreeMap::new(),
        };
        let file_wide = FileWide { main, claims, reserved };
        let mut loaded = Self::assemble(file_wide, file, base_dir, deployed, None)?;
        loaded.text = text.into();
        Ok(loaded)
    }

    /// The file's configuration with the `deployed` workers merged in (`last` after the
    /// others, so that a clash is reported against it), checked as one.
    fn assemble(
        file_wide: FileWide,
        file: &str,
        base_dir: PathBuf,
        deployed: BTreeMap<String, Stored>,
        last: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let FileWide { main, claims, reserved } = file_wide;
        let mut config = (*main).clone();
        if let Some(dir) = config.deploy.resolved_dir(&base_dir) {
            deployed::merge(&mut config, &dir, &claims, &deployed, last)?;
        }
        validate(&config, file)?;
        Ok(Self {
            config,
            file: file.to_owned(),
            base_dir,
            env_defaults: BTreeMap::new(),
            path: None,
            text: Arc::from(""),
            main,
            claims,
            reserved,
            deployed: Arc::new(deployed),
        })
    }

    /// The hosts tenants own: the router keeps a table for each.
    pub(crate) fn reserved_hosts(&self) -> &[HostPattern] {
        &self.reserved
    }

    /// This configuration with worker `name` (the name it is served under) deployed as
    /// `worker`, or removed (`None`), checked as a whole. Files are not touched.
    pub(crate) fn with_deployed(
        &self,
        name: &str,
        worker: Option<Stored>,
    ) -> Result<Self, ConfigError> {
        let mut deployed = (*self.deployed).clone();
        match worker {
            Some(worker) => deployed.insert(name.to_owned(), worker),
            None => deployed.remove(name),
        };
        let file_wide = FileWide {
            main: self.main.clone(),
            claims: self.claims.clone(),
            reserved: self.reserved.clone(),
        };
        let base_dir = self.base_dir.clone();
        let mut next = Self::assemble(file_wide, &self.file, base_dir, deployed, Some(name))?;
        next.path = self.path.clone();
        next.text = self.text.clone();
        next.env_defaults = self.env_defaults.clone();
        Ok(next)
    }

    /// Who put worker `name` (as served) in the configuration.
    pub(crate) fn owner(&self, name: &str) -> Owner {
        self.deployed.get(name).map_or(Owner::File, |stored| stored.owner.clone())
    }

    /// What `owner` may ask for: `None` for the configuration file, which may ask for anything.
    pub(crate) fn allowance(&self, owner: &Owner) -> Option<(&Grants, &Caps)> {
        match owner {
            Owner::File => None,
            Owner::Admin => Some((&self.config.deploy.grants, &self.config.deploy.caps)),
            Owner::Tenant(tenant) => self.config.tenants.get(tenant).map(|t| (&t.grants, &t.caps)),
        }
    }

    /// The `[deploy] dir`, resolved, if the admin API may deploy.
    pub(crate) fn deploy_dir(&self) -> Option<PathBuf> {
        self.config.deploy.resolved_dir(&self.base_dir)
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

/// What is worked out from the file alone, once per file: a deploy reuses it.
struct FileWide {
    main: Arc<Config>,
    claims: Arc<Claims<Owner>>,
    reserved: Arc<[HostPattern]>,
}

fn parse_as<T: serde::de::DeserializeOwned>(text: &str, file: &str) -> Result<T, ConfigError> {
    let error = |key: Option<String>, e: &toml::de::Error| ConfigError {
        file: file.to_owned(),
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

/// Checks what the types alone cannot, table by table.
fn validate(config: &Config, file: &str) -> Result<(), ConfigError> {
    server::validate(&config.server, file)?;
    runtime::validate(&config.runtime, file)?;
    registry::validate(&config.registry, file)?;
    for (name, worker) in &config.workers {
        worker::validate(name, worker, config, file)?;
    }
    for (name, kv) in &config.kv {
        kv::validate(kv, &format!("kv.{name}"), file)?;
    }
    for (name, upstream) in &config.upstreams {
        upstream::validate(upstream, &format!("upstreams.{name}"), file)?;
    }
    for (name, policy) in &config.rate_limits {
        rate_limit::validate(name, policy, config, file)?;
    }
    for (i, route) in config.routes.iter().enumerate() {
        route::validate(i, route, config, file)?;
    }
    redis::validate(config, file)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_runtime::{ByteSize, Limits};

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
        assert_eq!(w.limits.guest.cpu, Duration::from_millis(5));
        assert_eq!(w.limits.guest.memory, 4 << 20);
        assert_eq!(w.limits.guest.hostcalls, 1000, "unset limits keep their defaults");
        assert_eq!(w.limits.request_body, ByteSize(1 << 20));
        assert_eq!(w.config["greeting"], "hi");
        assert_eq!(c.routes[0].methods, ["POST"]);
    }

    #[test]
    fn request_body_is_the_hosts_and_the_rest_of_the_limits_table_the_runtimes() {
        let text = "[workers.w]\nmodule = \"m\"\nlimits = { request_body = \"1KiB\", kv_ops = 3, cpu = \"7ms\" }\n";
        let c = load(text).unwrap();
        let limits = &c.workers["w"].limits;
        assert_eq!(limits.request_body, ByteSize(1024));
        let guest = Limits { kv_ops: 3, cpu: Duration::from_millis(7), ..Limits::default() };
        assert_eq!(limits.guest, guest);
    }

    #[test]
    fn memory_init_is_cow_or_copy() {
        assert_eq!(load("").unwrap().runtime.memory_init, MemoryInit::Cow);
        let copy = load("[runtime]\nmemory_init = \"copy\"\n").unwrap();
        assert_eq!(copy.runtime.memory_init, MemoryInit::Copy);
        let e = error("[runtime]\nmemory_init = \"lazy\"\n");
        assert_eq!(e.key.as_deref(), Some("runtime.memory_init"), "{e}");
    }

    const RATE_LIMITED: &str = r#"
        [workers.echo]
        module = "builtin:echo-json"

        [rate_limits.per-ip]
        requests = 100
        burst = 20

        [rate_limits.per-key]
        requests = 1000
        per = "1m"
        key = ["header:X-Api-Key", "route"]
        dry_run = true

        [[routes]]
        path = "/echo"
        worker = "echo"
        rate_limits = ["per-ip", "per-key"]
    "#;

    #[test]
    fn rate_limit_policies_parse_with_their_defaults() {
        let c = load(RATE_LIMITED).unwrap();
        let ip = &c.rate_limits["per-ip"];
        assert_eq!((ip.requests, ip.per, ip.burst()), (100, Duration::from_secs(1), 20));
        assert_eq!((ip.key.as_slice(), ip.dry_run), (&["ip".to_owned()][..], false));
        let key = &c.rate_limits["per-key"];
        assert_eq!((key.per, key.burst(), key.dry_run), (Duration::from_secs(60), 1000, true));
        assert_eq!(c.routes[0].rate_limits, ["per-ip", "per-key"]);
        assert_eq!((ip.scope, ip.on_error), (Scope::Local, OnError::FailOpen));
        let shared = RATE_LIMITED.replacen(
            "dry_run = true",
            "scope = \"shared\"\nkv = \"counts\"\non_error = \"fail_closed\"\n\
             timeout = \"20ms\"\n[kv.counts]\nbackend = \"redis\"\nurl = \"redis://r\"",
            1,
        );
        let key = &load(&shared).unwrap().rate_limits["per-key"];
        assert_eq!((key.scope, key.kv.as_deref()), (Scope::Shared, Some("counts")));
        assert_eq!(key.timeout, Some(Duration::from_millis(20)));
        assert_eq!(key.on_error, OnError::FailClosed);
        let trusted = load("[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n").unwrap();
        let shown: Vec<String> =
            trusted.server.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "::1/128"]);
        let e = error("[server]\ntrusted_proxies = [\"10.0.0.0/33\"]\n");
        assert_eq!(e.key.as_deref(), Some("server.trusted_proxies"), "{e}");
    }

    #[test]
    fn a_bad_rate_limit_is_refused_where_it_is() {
        let bad = |from: &str, to: &str| {
            assert!(RATE_LIMITED.contains(from), "{from}");
            error(&RATE_LIMITED.replacen(from, to, 1))
        };
        let cases = [
            (("requests = 100", "requests = 0"), "rate_limits.per-ip.requests", "at least 1"),
            (("burst = 20", "burst = 0"), "rate_limits.per-ip.burst", "at least 1"),
            (("per = \"1m\"", "per = \"0s\""), "rate_limits.per-key.per", "longer than zero"),
            (
                ("key = [\"header", "key = [\"user\", \"header"),
                "rate_limits.per-key.key",
                "is not a key",
            ),
            (
                ("[\"per-ip\", \"per-key\"]", "[\"per-ip\", \"nope\"]"),
                "routes[0].rate_limits",
                "no `[rate_limits.nope]`",
            ),
            (
                ("[\"per-ip\", \"per-key\"]", "[\"per-ip\", \"per-ip\"]"),
                "routes[0].rate_limits",
                "named twice",
            ),
            (
                ("key = [\"header:X-Api-Key\", \"route\"]", "key = [\"claim:sub\"]"),
                "routes[0].rate_limits",
                "never a key",
            ),
            (
                ("dry_run = true", "scope = \"shared\""),
                "rate_limits.per-key.scope",
                "exactly one of `kv`, `url` and `url_env`",
            ),
            (
                ("dry_run = true", "scope = \"shared\"\nurl = \"redis://r\"\nkv = \"kv\""),
                "rate_limits.per-key.scope",
                "exactly one of",
            ),
            (("dry_run = true", "url = \"redis://r\""), "rate_limits.per-key.url", "only for"),
            (
                ("dry_run = true", "on_error = \"fail_closed\""),
                "rate_limits.per-key.on_error",
                "only for scope = \"shared\"",
            ),
            (
                ("dry_run = true", "scope = \"shared\"\nkv = \"nope\""),
                "rate_limits.per-key.kv",
                "no `[kv.nope]`",
            ),
            (
                ("dry_run = true", "scope = \"shared\"\nkv = \"local\"\n[kv.local]"),
                "rate_limits.per-key.kv",
                "is not in Redis",
            ),
            (
                ("dry_run = true", "scope = \"shared\"\nurl_env = \"R\"\ntimeout = \"0s\""),
                "rate_limits.per-key.timeout",
                "longer than zero",
            ),
            (
                ("dry_run = true", "scope = \"global\""),
                "rate_limits.per-key.scope",
                "unknown variant `global`",
            ),
        ];
        for ((from, to), key, message) in cases {
            let e = bad(from, to);
            assert_eq!(e.key.as_deref(), Some(key), "{to}: {e}");
            assert!(e.to_string().contains(message), "{to}: {e}");
        }
    }

    #[test]
    fn components_check_bounds_explicitly_unless_told_to_use_guard_pages() {
        use edgegate_runtime::BoundsChecks;
        let checks = |text: &str| load(text).unwrap().runtime.component_bounds_checks;
        assert_eq!(checks(""), BoundsChecks::Explicit);
        assert_eq!(
            checks("[runtime]\ncomponent_bounds_checks = \"guard-pages\"\n"),
            BoundsChecks::GuardPages
        );
        let e = error("[runtime]\ncomponent_bounds_checks = \"none\"\n");
        assert_eq!(e.key.as_deref(), Some("runtime.component_bounds_checks"), "{e}");
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
        let e = error("[workers.w]\nmodule = \"x.wasm\"\nlimits.request_body = \"lots\"\n");
        assert_eq!(e.key.as_deref(), Some("workers.w.limits.request_body"), "{e}");
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
        let share = |n: u32| {
            format!(
                "[server]\nmax_concurrency = 8\n[workers.w]\nmodule = \"m\"\nmax_concurrency = {n}\n"
            )
        };
        assert_eq!(key(share(0)), "workers.w.max_concurrency");
        assert_eq!(key(share(9)), "workers.w.max_concurrency");
        assert!(load(&share(8)).is_ok(), "a share may be every slot");
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
        assert_eq!(key(route("path = \"/a\"\nupstream = \"u\"")), "routes[0]");
        assert_eq!(
            key("[[routes]]\npath = \"/\"\nupstream = \"nope\"\n".into()),
            "routes[0].upstream"
        );
        // The TLS table: certificates named, one default at most.
        assert_eq!(key("[server.tls]\ncertificates = []\n".into()), "server.tls.certificates");
        let two = "{ cert = \"a\", key = \"b\", default = true }";
        assert_eq!(
            key(format!("[server.tls]\ncertificates = [{two}, {two}]\n")),
            "server.tls.certificates"
        );
        assert_eq!(
            key("[server]\nh2_connection_window = \"1KiB\"\n".into()),
            "server.h2_connection_window"
        );
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
    fn registry_references_and_settings_are_checked() {
        let key = |text: &str| error(text).key.unwrap();
        let module = |m: &str| format!("[workers.w]\nmodule = {m:?}\n");
        for bad in ["oci://echo:v1", "oci://127.0.0.1:5000/echo", "oci://"] {
            let e = error(&module(bad));
            assert_eq!(e.key.as_deref(), Some("workers.w.module"), "{bad}");
            assert!(e.to_string().contains("is not a reference"), "{e}");
        }
        assert!(load(&module("oci://127.0.0.1:5000/workers/echo:v1")).is_ok());
        let digest = format!("oci://registry.example/echo@sha256:{}", "a".repeat(64));
        assert!(load(&module(&digest)).is_ok());
        assert_eq!(key("[registry]\ntimeout = \"0s\"\n"), "registry.timeout");
        assert_eq!(key("[registry]\nmax_module = 0\n"), "registry.max_module");
        assert_eq!(key("[registry]\ninsecure = [\"http://r:5000\"]\n"), "registry.insecure[0]");
        assert_eq!(key("[registry]\npassword = \"x\"\n"), "registry.password");
        let registry = load("[registry]\ninsecure = [\"r.internal:5000\"]\n").unwrap().registry;
        assert_eq!(registry.insecure, ["r.internal:5000"]);
        assert_eq!(registry.max_module, ByteSize(64 << 20));
    }

    #[test]
    fn a_route_identity_names_its_keys_once_and_sets_headers_it_may() {
        let config = |identity: &str| {
            format!(
                "[workers.w]\nmodule = \"m\"\n[workers.k]\nmodule = \"m\"\n\
                 [workers.k.jwt]\nkeys = [{{ alg = \"HS256\", secret_env = \"S\" }}]\n\
                 [[routes]]\npath = \"/\"\nworker = \"w\"\n[routes.identity]\n{identity}\n"
            )
        };
        let key = |identity: &str| error(&config(identity)).key.unwrap();
        assert!(load(&config("worker = \"k\"\nclaims = { sub = \"x-jwt-sub\" }")).is_ok());
        let inline = "claims = { sub = \"x-sub\" }\n[routes.identity.jwt]\n\
                      keys = [{ alg = \"HS256\", secret_env = \"S\" }]";
        assert!(load(&config(inline)).is_ok());
        assert_eq!(key(""), "routes[0].identity");
        assert_eq!(key("worker = \"w\""), "routes[0].identity.worker", "no [workers.w.jwt]");
        assert_eq!(key("worker = \"none\""), "routes[0].identity.worker");
        assert_eq!(key("worker = \"k\"\n[routes.identity.jwt]\nkeys = []"), "routes[0].identity");
        assert_eq!(key("[routes.identity.jwt]\nkeys = []"), "routes[0].identity.jwt.keys");
        for header in ["Authorization", "host", "content-length", "a b"] {
            let claims = format!("worker = \"k\"\nclaims = {{ sub = \"{header}\" }}");
            assert_eq!(key(&claims), "routes[0].identity.claims.sub", "{header}");
        }
        let twice = "worker = \"k\"\nclaims = { sub = \"x-id\", oid = \"X-Id\" }";
        assert!(key(twice).starts_with("routes[0].identity.claims."), "{}", key(twice));
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
