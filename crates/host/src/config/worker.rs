//! `[workers.NAME]`: a module, its limits, and what it is granted.

use std::collections::BTreeMap;
use std::fmt;

use edgegate_runtime::{ByteSize, Limits};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

use super::{Config, ConfigError, ImageConfig, JwtConfig};

/// `[workers.NAME]`: a module and what it may use.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// A `.wasm` file (relative to this file), `builtin:NAME` for a worker bundled in the
    /// binary, or `oci://HOST[:PORT]/REPO:TAG` (or `…@sha256:DIGEST`) for one pulled from a
    /// registry.
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
    #[serde(default, deserialize_with = "super::image::grant")]
    pub image: Option<ImageConfig>,
    /// The most of the server's instance slots (`server.max_concurrency`) this worker's
    /// requests may hold at once: its share, so that one hot tenant cannot take every slot.
    /// Past it a request waits up to `server.queue_timeout`, then gets 503 `overloaded`.
    /// Default: no share of its own.
    pub max_concurrency: Option<u32>,
}

/// `[workers.NAME.limits]`: the runtime's [`Limits`], which bound the guest, and
/// `request_body`, which the host enforces before the guest runs. One table in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerLimits {
    /// Request body. Default 1MiB.
    ///
    /// The host reads the whole body before the guest runs, and stops reading past this many
    /// bytes: the client gets 413 `body_too_large` (at once, from `Content-Length`, when it
    /// declares one). The server-wide `max_request_body` applies too; the smaller one wins.
    pub request_body: ByteSize,
    /// Everything the runtime holds the guest to.
    pub guest: Limits,
}

impl WorkerLimits {
    /// The default `request_body`: 1MiB.
    pub const DEFAULT_REQUEST_BODY: ByteSize = ByteSize(1 << 20);
}

impl Default for WorkerLimits {
    fn default() -> Self {
        Self { request_body: Self::DEFAULT_REQUEST_BODY, guest: Limits::default() }
    }
}

impl<'de> Deserialize<'de> for WorkerLimits {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Table;

        impl<'de> Visitor<'de> for Table {
            type Value = WorkerLimits;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of limits")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WorkerLimits, A::Error> {
                let mut request_body = None;
                let guest = Limits::deserialize(SetAside { map, request_body: &mut request_body })?;
                Ok(WorkerLimits {
                    request_body: request_body.unwrap_or(WorkerLimits::DEFAULT_REQUEST_BODY),
                    guest,
                })
            }
        }

        deserializer.deserialize_map(Table)
    }
}

/// The limits table as the runtime's [`Limits`] reads it, with `request_body` set aside for
/// the host. Keys go through the underlying map one by one, so an error still names its key.
struct SetAside<'a, A> {
    map: A,
    request_body: &'a mut Option<ByteSize>,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for SetAside<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SetAside<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut seed = Some(seed);
        loop {
            match self.map.next_key_seed(Key(&mut seed))? {
                None => return Ok(None),
                Some(Some(key)) => return Ok(Some(key)),
                Some(None) => *self.request_body = Some(self.map.next_value()?),
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A key of the limits table: `None` for `request_body`, else the runtime's own key.
struct Key<'s, K>(&'s mut Option<K>);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for Key<'_, K> {
    type Value = Option<K::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let key = String::deserialize(deserializer)?;
        if key == "request_body" {
            return Ok(None);
        }
        let seed = self.0.take().expect("one key seed per key");
        seed.deserialize(key.into_deserializer()).map(Some)
    }
}

/// Checks a worker's limits, and that what it is granted exists.
pub(super) fn validate(
    name: &str,
    worker: &WorkerConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |key: String, message: &str| Err(ConfigError::at(file, key, message));
    let key = |field: &str| format!("workers.{name}.limits.{field}");
    let l = &worker.limits.guest;
    if l.memory < 65536 {
        return at(key("memory"), "must be at least 64KiB (one Wasm page)");
    }
    if l.memory > config.runtime.max_worker_memory.bytes() {
        return Err(ConfigError::at(
            file,
            key("memory"),
            format!(
                "{} is more than runtime.max_worker_memory ({})",
                ByteSize(l.memory),
                config.runtime.max_worker_memory
            ),
        ));
    }
    if l.cpu.is_zero() {
        return at(key("cpu"), "must be longer than zero");
    }
    if l.deadline.is_zero() {
        return at(key("deadline"), "must be longer than zero");
    }
    if let Some(share) = worker.max_concurrency {
        let slots = config.server.max_concurrency;
        if share == 0 || share > slots {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}.max_concurrency"),
                format!("must be from 1 to server.max_concurrency ({slots})"),
            ));
        }
    }
    if worker.module.trim().is_empty() {
        return at(
            format!("workers.{name}.module"),
            "must name a .wasm file, builtin:NAME or oci://HOST/REPO:TAG",
        );
    }
    if worker.module.starts_with(crate::registry::SCHEME) {
        crate::registry::parse(&worker.module)
            .map_err(|e| ConfigError::caused(file, format!("workers.{name}.module"), e))?;
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
        if let Err(error) = crate::capability::origin::Origin::parse(origin) {
            return Err(ConfigError::caused(file, format!("workers.{name}.fetch[{i}]"), error));
        }
    }
    if let Some(jwt) = &worker.jwt {
        super::jwt::validate(jwt, &format!("workers.{name}.jwt"), file)?;
        if let Some(key) = worker.config.keys().find(|k| k.starts_with("jwt.")) {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}.config.{key}"),
                "`jwt.*` values come from [workers.NAME.jwt]; set them there",
            ));
        }
    }
    Ok(())
}
