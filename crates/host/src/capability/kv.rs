//! The `[kv]` namespaces: each opened in its backend and seeded, before any worker runs.
//!
//! redb files are opened once each, however many namespaces share them; memory namespaces get
//! a background task that purges expired entries every [`PURGE_EVERY`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use edgegate_kv::{
    Backend, DiskFile, DiskStore, KvError, MemoryStore, Namespace, RedisSettings, RedisStore,
    SeedEntry, SeedError, Store, parse_seed,
};
use tokio::task::JoinHandle;

use crate::config::{ConfigError, DEMO_KV_SEED, KvBackend, KvConfig, Loaded};

/// The demo's data: 100 user profiles of 256 bytes, `user:1` to `user:100`.
const DEMO_SEED: &str = include_str!("demo-kv.ndjson");

/// How often expired entries leave a memory namespace.
const PURGE_EVERY: Duration = Duration::from_secs(10);

const DEFAULT_CAPACITY: u64 = 64 << 20;
const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(100);

/// Seed entries are written this many per call.
const SEED_BATCH: usize = 1000;

/// The namespaces by name, and their background tasks.
pub(crate) struct Opened {
    pub(crate) namespaces: BTreeMap<String, Namespace>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

/// Whether the namespaces are opened for serving, or only checked (`edgegate check`, which
/// must not lock a redb file a running gateway holds, connect to Redis, or write seeds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Serve,
    Check,
}

/// Opens and seeds every namespace (with [`Mode::Check`]: reads and parses the seeds, and
/// stands an empty memory store in for each namespace). Must run inside a tokio runtime.
pub(crate) async fn open(loaded: &Loaded, mode: Mode) -> Result<Opened, ConfigError> {
    let mut files: HashMap<PathBuf, DiskFile> = HashMap::new();
    let mut opened = Opened { namespaces: BTreeMap::new(), tasks: Vec::new() };
    for (name, config) in &loaded.config.kv {
        let error = |field: &str, error: SetupError| {
            ConfigError::caused(&loaded.file, format!("kv.{name}.{field}"), error)
        };
        let store = match config.backend {
            _ if mode == Mode::Check => {
                if let Some(seed) = &config.seed {
                    read_seed(loaded, seed).map_err(|e| error("seed", e))?;
                }
                if config.backend == KvBackend::Redis {
                    redis_url(loaded, &config.url, &config.url_env).map_err(|e| error("url", e))?;
                }
                Store::Memory(Arc::new(MemoryStore::new(0)))
            }
            KvBackend::Memory => {
                let capacity = config.capacity.map_or(DEFAULT_CAPACITY, |c| c.bytes());
                let store = Arc::new(MemoryStore::new(capacity));
                let purged = store.clone();
                opened.tasks.push(tokio::spawn(async move {
                    let mut every = tokio::time::interval(PURGE_EVERY);
                    loop {
                        every.tick().await;
                        purged.purge_expired();
                    }
                }));
                Store::Memory(store)
            }
            KvBackend::Redb => {
                let path = loaded.resolve(config.path.as_deref().unwrap_or_else(|| ".".as_ref()));
                let db = match files.get(&path) {
                    Some(db) => db.clone(),
                    None => {
                        let db = DiskStore::open(&path).map_err(|source| {
                            error("path", SetupError::Open { path: path.clone(), source })
                        })?;
                        files.insert(path.clone(), db.clone());
                        db
                    }
                };
                let store = DiskStore::namespace(db, name)
                    .map_err(|e| error("path", SetupError::Store(e)))?;
                Store::Disk(Arc::new(store))
            }
            KvBackend::Redis => {
                Store::Redis(Arc::new(redis(loaded, name, config).map_err(|e| error("url", e))?))
            }
        };
        if let Some(seed) = config.seed.as_ref().filter(|_| mode == Mode::Serve) {
            let count = write_seed(loaded, &store, seed).await.map_err(|e| error("seed", e))?;
            tracing::info!(namespace = %name, backend = store.kind(), entries = count, "kv seeded");
        }
        opened.namespaces.insert(name.clone(), Namespace { name: name.as_str().into(), store });
    }
    Ok(opened)
}

/// Why a namespace (or a shared rate limit's Redis) could not be opened or seeded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    #[error("${0} is not set")]
    NoEnv(String),
    #[error("no url")]
    NoUrl,
    #[error("cannot open `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: KvError,
    },
    #[error(transparent)]
    Store(KvError),
    #[error("cannot read `{}`", path.display())]
    ReadSeed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{seed}` is not a seed file")]
    ParseSeed {
        seed: String,
        #[source]
        source: SeedError,
    },
    #[error("writing `{seed}`")]
    WriteSeed {
        seed: String,
        #[source]
        source: KvError,
    },
}

/// The Redis URL `url` gives, or the environment variable `url_env` holds.
pub(crate) fn redis_url(
    loaded: &Loaded,
    url: &Option<String>,
    url_env: &Option<String>,
) -> Result<String, SetupError> {
    match (url, url_env) {
        (Some(url), _) => Ok(url.clone()),
        (None, Some(var)) => loaded.env_var(var).ok_or_else(|| SetupError::NoEnv(var.clone())),
        (None, None) => Err(SetupError::NoUrl),
    }
}

fn redis(loaded: &Loaded, name: &str, config: &KvConfig) -> Result<RedisStore, SetupError> {
    let url = redis_url(loaded, &config.url, &config.url_env)?;
    let prefix = crate::config::redis::kv_prefix(name, config);
    RedisStore::new(RedisSettings {
        url,
        timeout: config.timeout.unwrap_or(DEFAULT_REDIS_TIMEOUT),
        prefix: prefix.into_bytes(),
    })
    .map_err(SetupError::Store)
}

fn read_seed(loaded: &Loaded, seed: &str) -> Result<Vec<SeedEntry>, SetupError> {
    let text = if seed == DEMO_KV_SEED {
        DEMO_SEED.to_owned()
    } else {
        let path = loaded.resolve(seed.as_ref());
        std::fs::read_to_string(&path).map_err(|source| SetupError::ReadSeed { path, source })?
    };
    parse_seed(&text).map_err(|source| SetupError::ParseSeed { seed: seed.into(), source })
}

async fn write_seed(loaded: &Loaded, store: &Store, seed: &str) -> Result<usize, SetupError> {
    let entries = read_seed(loaded, seed)?;
    // Entries with the same TTL go in one batch call.
    let mut written = 0;
    for chunk in entries.chunk_by(|a, b| a.ttl == b.ttl) {
        for batch in chunk.chunks(SEED_BATCH) {
            let pairs: Vec<(&[u8], &[u8])> =
                batch.iter().map(|e| (&e.key[..], &e.value[..])).collect();
            store
                .put_many(&pairs, batch[0].ttl)
                .await
                .map_err(|source| SetupError::WriteSeed { seed: seed.into(), source })?;
            written += batch.len();
        }
    }
    Ok(written)
}
