//! JWT keys, from every source a `[workers.NAME.jwt]` (or a route's `[routes.identity.jwt]`)
//! lists, kept current.
//!
//! Secrets, PEM and JWK keys and JWKS files are read once, at start. A JWKS URL is fetched at
//! start (bounded by its `timeout`) and then in the background:
//!
//! ```text
//!        fetch ok ──▶ keys, fresh for ttl = s-maxage | max-age − Age | Expires − Date | refresh
//!           │            clamped to [min_refresh, max_refresh]; 304 keeps the keys, new ttl
//!           ▼
//!   wait ttl ──▶ fetch (If-None-Match / If-Modified-Since)
//!           │ fails: keep the keys until ttl + max_stale, retry 1 s, 2 s, 4 s … ≤ 60 s
//!           ▼
//!   past ttl + max_stale: the URL's keys are dropped; the set is "incomplete", so a token
//!   whose kid matches nothing else is answered 503 (keys unavailable), not 401
//! ```
//!
//! Each change is published to the worker as a whole new `KeySet` (an `ArcSwap` store): the
//! request path never waits on a fetch. A token's `kid` never causes a fetch or a file read.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use edgegate_runtime::Keys;
use edgegate_runtime::keys::{Alg, Key, KeyError, KeySet, parse_jwks};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::capability::origin::Origin;
use crate::capability::reach::{Guard, Reach};
use crate::config::{ConfigError, Grants, JwtConfig, KeySourceConfig, Loaded};
use crate::error::error_chain;
use crate::forward::client::{self, HttpClient};

/// A JWK Set larger than this is refused.
const MAX_JWKS: usize = 1 << 20;
/// Retries after a failed fetch back off up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
const DEFAULT_MIN_REFRESH: Duration = Duration::from_secs(30);
const DEFAULT_MAX_REFRESH: Duration = Duration::from_secs(24 * 3600);
const DEFAULT_MAX_STALE: Duration = Duration::from_secs(3600);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// A worker's keys and the tasks that keep them current (aborted when dropped).
#[derive(Debug)]
pub(crate) struct WorkerKeys {
    pub(crate) keys: Keys,
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

/// The keys of one JWKS URL, as last fetched.
#[derive(Debug, Default)]
struct Slot {
    keys: Vec<Key>,
    /// Usable until then (ttl + max_stale); `None` until the first successful fetch.
    usable_until: Option<Instant>,
    etag: Option<HeaderValue>,
    last_modified: Option<HeaderValue>,
}

impl Slot {
    fn usable(&self, now: Instant) -> bool {
        self.usable_until.is_some_and(|until| now < until)
    }
}

/// Everything a worker's key set is made of.
#[derive(Debug)]
struct Sources {
    fixed: Vec<Key>,
    urls: Vec<Mutex<Slot>>,
    keys: Keys,
}

impl Sources {
    /// Rebuilds the worker's key set from what every source has now.
    fn publish(&self) {
        let now = Instant::now();
        let mut keys = self.fixed.clone();
        let mut incomplete = false;
        for slot in &self.urls {
            let slot = slot.lock();
            if slot.usable(now) {
                keys.extend(slot.keys.iter().cloned());
            } else {
                incomplete = true;
            }
        }
        self.keys.store(KeySet::new(keys).with_incomplete(incomplete));
    }
}

/// Loads every source of `jwt`, the table at `at` (`workers.NAME.jwt`, `routes[N].identity.jwt`),
/// fetches its URLs once, and starts refreshing them. `grants`: those of the deployer of the
/// worker or route it is for (`None`: the configuration file's), whose `fetch` decides where
/// a JWKS URL may connect.
pub(crate) async fn load(
    loaded: &Loaded,
    at: &str,
    jwt: &JwtConfig,
    grants: Option<&Grants>,
) -> Result<WorkerKeys, ConfigError> {
    let mut fixed = Vec::new();
    let mut fetchers = Vec::new();
    for (i, source) in jwt.keys.iter().enumerate() {
        let at = format!("{at}.keys[{i}]");
        match &source.jwks_url {
            Some(url) => {
                let guard = match grants {
                    None => Guard::none(),
                    Some(grants) => {
                        let origin = url.parse::<http::Uri>().ok().and_then(|u| Origin::of(&u));
                        let reach = origin.and_then(|o| grants.reach(&o)).unwrap_or(Reach::Public);
                        Guard { reach, admin: loaded.config.server.admin }
                    }
                };
                fetchers.push(Fetcher::new(loaded, &at, url, source, guard)?)
            }
            None => fixed.extend(fixed_keys(loaded, &at, source)?),
        }
    }
    warn_duplicates(at, &fixed);
    let sources = Arc::new(Sources {
        fixed,
        urls: fetchers.iter().map(|_| Mutex::new(Slot::default())).collect(),
        keys: Keys::new(KeySet::default()),
    });
    // Each URL's task fetches once and says so, then keeps refreshing; start-up waits for
    // every first fetch (each bounded by its timeout), so the first requests have keys.
    let mut tasks = Vec::new();
    let mut first_fetches = Vec::new();
    for (i, fetcher) in fetchers.into_iter().enumerate() {
        let sources = sources.clone();
        let (done, first) = tokio::sync::oneshot::channel();
        first_fetches.push(first);
        tasks.push(tokio::spawn(async move {
            let ok = fetcher.refresh(&sources, i).await;
            sources.publish();
            let _ = done.send(());
            fetcher.run(&sources, i, ok).await;
        }));
    }
    for first in first_fetches {
        let _ = first.await;
    }
    sources.publish();
    Ok(WorkerKeys { keys: sources.keys.clone(), tasks })
}

fn warn_duplicates(table: &str, keys: &[Key]) {
    for (i, key) in keys.iter().enumerate() {
        if keys[..i].iter().any(|other| other.kid() == key.kid() && other.alg() == key.alg()) {
            tracing::warn!(table, kid = ?key.kid(), alg = %key.alg(), "two keys with the same kid and alg: only the first is used");
        }
    }
}

/// Why a key source that is not a URL gave no keys.
#[derive(Debug, thiserror::Error)]
enum SourceError {
    #[error("cannot read `{}`", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("is not UTF-8 text")]
    NotUtf8(#[source] std::string::FromUtf8Error),
    #[error("not JSON")]
    NotJson(#[source] serde_json::Error),
    #[error("environment variable `{0}` is not set")]
    NoEnv(String),
    #[error("needs `alg`")]
    NoAlg,
    #[error(transparent)]
    Key(KeyError),
}

/// The keys of a source that is not a URL.
fn fixed_keys(
    loaded: &Loaded,
    at: &str,
    source: &KeySourceConfig,
) -> Result<Vec<Key>, ConfigError> {
    let alg = source.alg.as_deref().and_then(Alg::from_name);
    let kid = source.kid.clone();
    let error = |field: &str, error: SourceError| {
        ConfigError::caused(&loaded.file, format!("{at}.{field}"), error)
    };
    let read = |field: &str, path: &std::path::Path| {
        let path = loaded.resolve(path);
        std::fs::read(&path).map_err(|source| error(field, SourceError::Read { path, source }))
    };
    let text = |field: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|e| error(field, SourceError::NotUtf8(e)))
    };
    // Validation made sure `alg` is set (and valid) where a source needs it.
    let needs_alg = |field: &str| alg.ok_or_else(|| error(field, SourceError::NoAlg));
    let key = |field: &str, result: Result<Key, KeyError>| {
        result.map(|k| vec![k]).map_err(|e| error(field, SourceError::Key(e)))
    };
    if let Some(var) = &source.secret_env {
        let secret = loaded
            .env_var(var)
            .ok_or_else(|| error("secret_env", SourceError::NoEnv(var.clone())))?;
        return key("secret_env", Key::hmac(needs_alg("alg")?, secret.as_bytes(), kid));
    }
    if let Some(path) = &source.secret_file {
        let mut secret = read("secret_file", path)?;
        if secret.ends_with(b"\n") {
            secret.pop();
            if secret.ends_with(b"\r") {
                secret.pop();
            }
        }
        return key("secret_file", Key::hmac(needs_alg("alg")?, &secret, kid));
    }
    if let Some(pem) = &source.pem {
        return key("pem", Key::from_pem(needs_alg("alg")?, pem, kid));
    }
    if let Some(path) = &source.pem_file {
        let pem = text("pem_file", read("pem_file", path)?)?;
        return key("pem_file", Key::from_pem(needs_alg("alg")?, &pem, kid));
    }
    let jwk = |field: &str, text: &str| {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| error(field, SourceError::NotJson(e)))?;
        key(field, Key::from_jwk(&value, alg, kid.clone()))
    };
    if let Some(text) = &source.jwk {
        return jwk("jwk", text);
    }
    if let Some(path) = &source.jwk_file {
        return jwk("jwk_file", &text("jwk_file", read("jwk_file", path)?)?);
    }
    if let Some(path) = &source.jwks_file {
        let text = text("jwks_file", read("jwks_file", path)?)?;
        let parsed = parse_jwks(&text, alg).map_err(|e| error("jwks_file", SourceError::Key(e)))?;
        for (kid, why) in &parsed.skipped {
            tracing::warn!(source = at, ?kid, "JWKS key skipped: {why}");
        }
        return Ok(parsed.keys);
    }
    Err(ConfigError::at(&loaded.file, at.to_owned(), "no source of keys"))
}

/// Fetches one JWKS URL.
struct Fetcher {
    url: http::Uri,
    client: HttpClient,
    alg: Option<Alg>,
    refresh: Duration,
    min_refresh: Duration,
    max_refresh: Duration,
    max_stale: Duration,
    timeout: Duration,
}

/// Why a JWKS fetch brought no keys.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the request failed")]
    Send(#[source] hyper_util::client::legacy::Error),
    #[error("HTTP {0}")]
    Status(StatusCode),
    #[error("reading the body")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the body is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    #[error(transparent)]
    Keys(KeyError),
}

/// What a fetch brought.
enum Fetched {
    Keys {
        keys: Vec<Key>,
        ttl: Duration,
        etag: Option<HeaderValue>,
        last_modified: Option<HeaderValue>,
    },
    NotModified {
        ttl: Duration,
    },
}

impl Fetcher {
    fn new(
        loaded: &Loaded,
        at: &str,
        url: &str,
        source: &KeySourceConfig,
        guard: Guard,
    ) -> Result<Self, ConfigError> {
        let timeout = source.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let ca_file = source.ca_file.as_deref().map(|p| loaded.resolve(p));
        let client = client::build(&client::ClientSettings {
            connect_timeout: timeout,
            idle_timeout: Duration::from_secs(90),
            max_idle: 1,
            ca_file: ca_file.as_deref(),
            name: "(jwks)",
            guard,
        })
        .map_err(|e| ConfigError::caused(&loaded.file, format!("{at}.ca_file"), e))?;
        let min_refresh = source.min_refresh.unwrap_or(DEFAULT_MIN_REFRESH);
        Ok(Self {
            url: url.parse().map_err(|e: http::uri::InvalidUri| {
                ConfigError::caused(&loaded.file, format!("{at}.jwks_url"), e)
            })?,
            client,
            alg: source.alg.as_deref().and_then(Alg::from_name),
            refresh: source.refresh.unwrap_or(DEFAULT_REFRESH),
            min_refresh,
            max_refresh: source.max_refresh.unwrap_or(DEFAULT_MAX_REFRESH).max(min_refresh),
            max_stale: source.max_stale.unwrap_or(DEFAULT_MAX_STALE),
            timeout,
        })
    }

    /// Refreshes forever: after each success, when its keys expire; after a failure, soon.
    /// `ok` says how the first fetch went.
    async fn run(&self, sources: &Sources, slot: usize, ok: bool) {
        let mut failures = u32::from(!ok);
        loop {
            let now = Instant::now();
            let (usable_until, fresh_until) = {
                let s = sources.urls[slot].lock();
                (s.usable_until, s.usable_until.map(|u| u.checked_sub(self.max_stale).unwrap_or(u)))
            };
            let wait = match (failures, fresh_until) {
                (0, Some(fresh)) => fresh.saturating_duration_since(now),
                _ => {
                    let backoff = Duration::from_secs(1 << failures.min(6)).min(MAX_BACKOFF);
                    // Wake when the keys go stale too, to publish that they are gone.
                    match usable_until.filter(|u| *u > now) {
                        Some(until) => backoff.min(until - now),
                        None => backoff,
                    }
                }
            };
            tokio::time::sleep(wait).await;
            if self.refresh(sources, slot).await {
                failures = 0;
            } else {
                failures = failures.saturating_add(1);
            }
            sources.publish();
        }
    }

    /// One fetch, and what it changes in the slot. Returns whether it succeeded.
    async fn refresh(&self, sources: &Sources, slot: usize) -> bool {
        let (etag, last_modified) = {
            let s = sources.urls[slot].lock();
            (s.etag.clone(), s.last_modified.clone())
        };
        let result = tokio::time::timeout(self.timeout, self.fetch(etag, last_modified)).await;
        let result = result.unwrap_or(Err(FetchError::Timeout(self.timeout)));
        let mut s = sources.urls[slot].lock();
        match result {
            Ok(Fetched::Keys { keys, ttl, etag, last_modified }) => {
                tracing::info!(url = %self.url, keys = keys.len(), next_refresh = ?ttl, "JWKS fetched");
                *s = Slot {
                    keys,
                    usable_until: Some(Instant::now() + ttl + self.max_stale),
                    etag,
                    last_modified,
                };
                true
            }
            Ok(Fetched::NotModified { ttl }) => {
                tracing::debug!(url = %self.url, next_refresh = ?ttl, "JWKS not modified");
                s.usable_until = Some(Instant::now() + ttl + self.max_stale);
                true
            }
            Err(e) => {
                let state = if s.usable(Instant::now()) {
                    "keeping the last keys"
                } else {
                    "no keys from it: tokens it signed get 503 until a fetch succeeds"
                };
                tracing::warn!(url = %self.url, "JWKS fetch failed ({}); {state}", error_chain(&e));
                false
            }
        }
    }

    async fn fetch(
        &self,
        etag: Option<HeaderValue>,
        last_modified: Option<HeaderValue>,
    ) -> Result<Fetched, FetchError> {
        let mut request = http::Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = self.url.clone();
        let headers = request.headers_mut();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, application/jwk-set+json"),
        );
        if let Some(etag) = etag {
            headers.insert(header::IF_NONE_MATCH, etag);
        }
        if let Some(date) = last_modified {
            headers.insert(header::IF_MODIFIED_SINCE, date);
        }
        let response = self.client.request(request).await.map_err(FetchError::Send)?;
        let ttl = self.ttl(response.headers());
        match response.status() {
            StatusCode::NOT_MODIFIED => return Ok(Fetched::NotModified { ttl }),
            StatusCode::OK => {}
            other => return Err(FetchError::Status(other)),
        }
        let etag = response.headers().get(header::ETAG).cloned();
        let last_modified = response.headers().get(header::LAST_MODIFIED).cloned();
        let body = Limited::new(response.into_body(), MAX_JWKS)
            .collect()
            .await
            .map_err(FetchError::Body)?
            .to_bytes();
        let text = std::str::from_utf8(&body).map_err(FetchError::NotUtf8)?;
        let parsed = parse_jwks(text, self.alg).map_err(FetchError::Keys)?;
        for (kid, why) in &parsed.skipped {
            tracing::warn!(url = %self.url, ?kid, "JWKS key skipped: {why}");
        }
        Ok(Fetched::Keys { keys: parsed.keys, ttl, etag, last_modified })
    }

    /// How long a response may be used, from its cache headers, within the configured bounds.
    fn ttl(&self, headers: &HeaderMap) -> Duration {
        cache_lifetime(headers, SystemTime::now())
            .unwrap_or(self.refresh)
            .clamp(self.min_refresh, self.max_refresh)
    }
}

/// The freshness lifetime RFC 9111 §4.2.1 gives a response: `s-maxage` (this is a shared
/// cache), else `max-age`, less `Age`; else `Expires` − `Date`; zero for `no-store` or
/// `no-cache`. `None` when the headers say nothing.
fn cache_lifetime(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let mut max_age = None;
    let mut s_maxage = None;
    for directive in headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let directive = directive.trim().to_ascii_lowercase();
        let (name, value) =
            directive.split_once('=').map_or((directive.as_str(), None), |(n, v)| (n, Some(v)));
        let seconds = || value.and_then(|v| v.trim_matches('"').parse::<u64>().ok());
        match name.trim() {
            "no-store" | "no-cache" => return Some(Duration::ZERO),
            "max-age" => max_age = seconds(),
            "s-maxage" => s_maxage = seconds(),
            _ => {}
        }
    }
    if let Some(seconds) = s_maxage.or(max_age) {
        let age = headers
            .get(header::AGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        return Some(Duration::from_secs(seconds.saturating_sub(age)));
    }
    let date = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
    };
    if let Some(value) = headers.get(header::EXPIRES) {
        // An invalid Expires (often "0") means already expired.
        let Some(expires) = value.to_str().ok().and_then(|v| httpdate::parse_http_date(v).ok())
        else {
            return Some(Duration::ZERO);
        };
        let base = date(header::DATE).unwrap_or(now);
        return Some(expires.duration_since(base).unwrap_or(Duration::ZERO));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::headers::header_map as headers;

    #[test]
    fn cache_headers_set_the_lifetime() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let life =
            |pairs: &[(&str, &str)]| cache_lifetime(&headers(pairs), now).map(|d| d.as_secs());
        assert_eq!(life(&[]), None);
        assert_eq!(life(&[("cache-control", "public, max-age=600")]), Some(600));
        assert_eq!(
            life(&[("cache-control", "max-age=600, s-maxage=60")]),
            Some(60),
            "a shared cache"
        );
        assert_eq!(life(&[("cache-control", "max-age=600"), ("age", "100")]), Some(500));
        assert_eq!(life(&[("cache-control", "max-age=60"), ("age", "100")]), Some(0));
        assert_eq!(life(&[("cache-control", "no-cache")]), Some(0));
        assert_eq!(life(&[("cache-control", "private"), ("cache-control", "no-store")]), Some(0));
        let date = httpdate::fmt_http_date(now);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(3600));
        assert_eq!(life(&[("expires", &later), ("date", &date)]), Some(3600));
        assert_eq!(life(&[("expires", &later)]), Some(3600), "against our clock without Date");
        assert_eq!(life(&[("expires", "0")]), Some(0));
        assert_eq!(
            life(&[("expires", &later), ("cache-control", "max-age=5")]),
            Some(5),
            "max-age wins"
        );
    }
}
