//! Building a [`Gateway`] from a configuration: open the upstream pools and KV namespaces,
//! load the keys, load (or compile) every worker, compile the routes. `edgegate serve` and
//! `edgegate check` both run it; the request path is in the parent module.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use edgegate_runtime::{
    ByteSize, Checked, Fetcher, LoadError, ModuleCache, Pruning, Runtime, RuntimeConfig, Source,
    WorkerSpec,
};
use http::{HeaderValue, Response, header};
use tokio::sync::Semaphore;

use arc_swap::ArcSwap;
use edgegate_runtime::{Keys, Worker};

use super::snapshot::Kv;
use super::tenants::Tenants;
use super::{
    Action, Background, Gateway, Gauges, RequestIds, Share, Snapshot, SplitTarget, Target,
    UpstreamTarget, WorkerTarget,
};
use crate::capability::fetch::{FetchPools, WorkerFetcher};
use crate::capability::kv::Mode as KvMode;
use crate::capability::origin::Origin;
use crate::capability::reach::Reach;
use crate::config::{
    ConfigError, DEMO_ORIGIN, Grants, JwtConfig, Loaded, Owner, RespondConfig, WorkerConfig,
};
use crate::forward::pool::PoolSettings;
use crate::forward::upstream::Upstream;
use crate::observe::metrics::{CountsBy, RouteMetrics};
use crate::registry::{Credentials, Digest, Pull, Pulled, Resolution, Store};
use crate::route::claims::ClaimSource;
use crate::route::identity::Identity;
use crate::route::rate_limit::{Policy, RouteLimit};
use crate::route::router::Router;
use crate::route::split::Split;

/// The modules `builtin:NAME` refers to: the workers bundled in the binary.
pub type Builtins = &'static [(&'static str, &'static [u8])];

impl Gateway {
    /// Loads every worker of `loaded` (compiling or loading from the module cache), opens the
    /// upstream pools (starting the demo origin where configured), loads the JWT keys
    /// (fetching JWKS URLs once), and compiles the routes: the first snapshot. Must run
    /// inside a tokio runtime.
    pub async fn build(loaded: &Loaded, builtins: Builtins) -> Result<Self, ConfigError> {
        Self::build_as(loaded, builtins, KvMode::Serve).await
    }

    /// What `edgegate check` runs: [`Gateway::build`], except that KV namespaces are only
    /// checked (seeds parsed, Redis URLs resolved), not opened: a redb file a running gateway
    /// holds stays unlocked, Redis is not contacted and no seed is written. A reload runs the
    /// same steps, so a configuration `check` passes is one a reload takes.
    pub async fn check(loaded: &Loaded, builtins: Builtins) -> Result<Self, ConfigError> {
        Self::build_as(loaded, builtins, KvMode::Check).await
    }

    async fn build_as(
        loaded: &Loaded,
        builtins: Builtins,
        kv_mode: KvMode,
    ) -> Result<Self, ConfigError> {
        let config = &loaded.config;
        let token = crate::config::token::Token::from_env()?;
        let cache = open_cache(loaded);
        let runtime = Runtime::new(runtime_config(config), cache)
            .map_err(|e| ConfigError::caused(&loaded.file, "runtime", e))?;
        let opened = crate::capability::kv::open(loaded, kv_mode).await?;
        let kv = Arc::new(Kv { namespaces: opened.namespaces, _tasks: Background(opened.tasks) });
        let sessions = match &config.server.tls {
            Some(tls) => Some(
                crate::listen::tls::Sessions::new(tls.session_cache)
                    .map_err(|e| ConfigError::caused(&loaded.file, "server.tls", e))?,
            ),
            None => None,
        };
        let registries = Arc::new(crate::registry::Clients::default());
        let steps = Steps {
            runtime: &runtime,
            loaded,
            builtins,
            registries: &registries,
            previous: None,
            sessions: sessions.as_ref(),
            deploying: None,
            registry_fallback: kv_mode == KvMode::Serve,
            admin_token: token.hash(),
        };
        let snapshot = steps.snapshot(kv, 1).await?;
        snapshot.publish(None);
        if kv_mode == KvMode::Serve {
            runtime.prune_cache();
        }
        Ok(Self {
            current: ArcSwap::from_pointee(snapshot),
            permits: Arc::new(Semaphore::new(config.server.max_concurrency as usize)),
            ids: RequestIds::new(),
            unrouted: RouteMetrics::unrouted(),
            gauges: Gauges::register(config.server.max_concurrency),
            runtime,
            reloads: tokio::sync::Mutex::new(super::Reloads { builtins, registries }),
            sessions,
            token,
        })
    }
}

/// Building a snapshot, a named step at a time: start-up runs it for the first snapshot, a
/// reload for the next.
pub(super) struct Steps<'a> {
    pub(super) runtime: &'a Runtime,
    pub(super) loaded: &'a Loaded,
    pub(super) builtins: Builtins,
    /// The registry clients, kept across reloads.
    pub(super) registries: &'a Arc<crate::registry::Clients>,
    /// The snapshot serving, on a reload: a worker whose module file is unchanged is not read
    /// again.
    pub(super) previous: Option<&'a Snapshot>,
    /// The gateway's TLS sessions, with `[server.tls]`.
    pub(super) sessions: Option<&'a crate::listen::tls::Sessions>,
    /// On a deploy, the worker it changes: the others are carried over from `previous`
    /// without looking at their modules again ([`Runtime::carry`]).
    pub(super) deploying: Option<&'a str>,
    /// Whether an `oci://` module whose registry is out of reach may be served as it last
    /// resolved (at start-up; a reload or a check fails instead).
    pub(super) registry_fallback: bool,
    /// The admin token's sha256, if one is set: no tenant's token may be it.
    pub(super) admin_token: Option<[u8; 32]>,
}

impl Steps<'_> {
    /// Opens the upstreams, checks the workers and loads their keys, and compiles the
    /// routes.
    pub(super) async fn snapshot(
        &self,
        kv: Arc<Kv>,
        generation: u64,
    ) -> Result<Snapshot, ConfigError> {
        let mut background = Background::default();
        let tls = self.load_certificates()?;
        let tenants = self.tenants()?;
        let upstreams = self.open_upstreams(&mut background).await?;
        let fetch_pools = self.fetch_pools()?;
        let pulled = self.pull_modules().await?;
        let workers =
            self.load_workers(&kv, &upstreams, &fetch_pools, &pulled, &mut background).await?;
        let shares = self.shares();
        let route_keys = self.load_route_keys(&mut background).await?;
        let rate_limits = self.rate_limits()?;
        let compiled = Compiled { workers: &workers, upstreams: &upstreams, shares: &shares };
        let router = self.compile_routes(&compiled, &route_keys, &rate_limits, &tenants);
        let config = &self.loaded.config;
        Ok(Snapshot {
            generation,
            loaded: self.loaded.clone(),
            router,
            server: config.server.clone(),
            path_rules: config.server.path_rules(),
            upstreams,
            worker_info: workers
                .iter()
                .map(|(name, (worker, _))| {
                    let digest = worker.module_info().digest.clone();
                    let labels = vec![("worker", name.clone()), ("digest", digest)];
                    crate::observe::metrics::gauge("edgegate_worker_info", labels)
                })
                .collect(),
            workers: workers.into_iter().map(|(name, (worker, _))| (name, worker)).collect(),
            pulled: self.manifests(&pulled),
            shares,
            rate_limits,
            trusted_proxies: crate::route::rate_key::TrustedProxies::new(
                config.server.trusted_proxies.clone(),
                config.server.client_address_header,
            ),
            kv,
            tls,
            tenants,
            _background: background,
        })
    }

    /// The tenants: the previous snapshot's when the file's tenants are the same (a deploy,
    /// which rereads nothing), else read again, keeping each one's share and counters.
    fn tenants(&self) -> Result<Arc<Tenants>, ConfigError> {
        let loaded = self.loaded;
        match self.previous {
            Some(previous)
                if Arc::ptr_eq(&previous.loaded.config.tenants, &loaded.config.tenants) =>
            {
                Ok(previous.tenants.clone())
            }
            previous => {
                let previous = previous.map(|p| &*p.tenants);
                Ok(Arc::new(Tenants::new(loaded, self.admin_token, previous)?))
            }
        }
    }

    /// The TLS listener's certificates and settings, each file read and checked.
    fn load_certificates(&self) -> Result<Option<Arc<rustls::ServerConfig>>, ConfigError> {
        let loaded = self.loaded;
        let (Some(tls), Some(sessions)) = (&loaded.config.server.tls, self.sessions) else {
            return Ok(None);
        };
        crate::listen::tls::server_config(loaded, tls, sessions).map(Some)
    }

    /// Each `[upstreams.NAME]`'s pool (and the demo origin's listener where one is named).
    async fn open_upstreams(
        &self,
        background: &mut Background,
    ) -> Result<HashMap<String, Arc<Upstream>>, ConfigError> {
        let loaded = self.loaded;
        let mut upstreams = HashMap::new();
        for (name, upstream) in &loaded.config.upstreams {
            let at = |field: &str| format!("upstreams.{name}.{field}");
            let url: http::Uri = if upstream.url == DEMO_ORIGIN {
                let (addr, task) = crate::demo::origin::start(name)
                    .await
                    .map_err(|e| ConfigError::caused(&loaded.file, at("url"), DemoOrigin(e)))?;
                background.0.push(task);
                http::Uri::from_maybe_shared(format!("http://{addr}"))
                    .map_err(|e| ConfigError::caused(&loaded.file, at("url"), e))?
            } else {
                upstream.url.parse().map_err(|e| ConfigError::caused(&loaded.file, at("url"), e))?
            };
            let ca_file = upstream.ca_file.as_deref().map(|p| loaded.resolve(p));
            let pool = Upstream::new(name, &url, upstream, ca_file.as_deref())
                .map_err(|e| ConfigError::caused(&loaded.file, at("ca_file"), e))?;
            upstreams.insert(name.clone(), Arc::new(pool));
        }
        Ok(upstreams)
    }

    /// The `[fetch]` pools: with the guarded ones when a deployed worker fetches.
    fn fetch_pools(&self) -> Result<Arc<FetchPools>, ConfigError> {
        let loaded = self.loaded;
        let ca = loaded.config.fetch.ca_file.as_deref().map(|p| loaded.resolve(p));
        let settings = PoolSettings::fetch(&loaded.config.fetch, ca.as_deref());
        let guarded = loaded.deployed.values().any(|s| !s.deployed.worker.fetch.is_empty());
        FetchPools::new(&settings, guarded, loaded.config.server.admin)
            .map(Arc::new)
            .map_err(|e| ConfigError::caused(&loaded.file, "fetch.ca_file", e))
    }

    /// Each `oci://` module resolved to a digest and pulled ([`Pull`]), several at a time. On
    /// a deploy, only the deployed worker's: the others are carried over as they are.
    async fn pull_modules(&self) -> Result<BTreeMap<String, Pulled>, ConfigError> {
        let loaded = self.loaded;
        // By reference: a worker that wants it, and the largest module it may be (a deployed
        // worker's caps.module; the least of them when several want it).
        let mut wanted: BTreeMap<String, (String, ByteSize)> = BTreeMap::new();
        for (name, worker) in &loaded.config.workers {
            let carried = self.previous.is_some() && self.deploying.is_some_and(|d| d != name);
            if worker.module.starts_with(crate::registry::SCHEME) && !carried {
                let cap = loaded.allowance(&loaded.owner(name)).map(|(_, caps)| caps.module);
                let max = cap.unwrap_or(ByteSize(u64::MAX));
                let entry = wanted.entry(worker.module.clone()).or_insert((name.clone(), max));
                if max < entry.1 {
                    *entry = (name.clone(), max);
                }
            }
        }
        if wanted.is_empty() {
            return Ok(BTreeMap::new());
        }
        let store = cache_dir(loaded).and_then(|dir| {
            Store::open(&dir)
                .inspect_err(|e| {
                    tracing::warn!(
                        "pulled modules are held in memory only, and a restart needs the registry: {}",
                        crate::error::error_chain(e)
                    )
                })
                .ok()
        });
        let settings = &loaded.config.registry;
        let pull = Arc::new(Pull {
            insecure: settings.insecure.clone(),
            timeout: settings.timeout,
            max_module: settings.max_module,
            clients: self.registries.clone(),
            credentials: Credentials::default(),
            store,
            fallback: self.registry_fallback,
        });
        let permits = Arc::new(Semaphore::new(PULL_CONCURRENCY));
        let mut pulls = tokio::task::JoinSet::new();
        for (reference, (name, max)) in wanted {
            let (pull, permits) = (pull.clone(), permits.clone());
            pulls.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let pulled = pull.resolve(&reference, max).await.and_then(|pulled| {
                    // A module stored before, for a worker allowed more, is held to it too.
                    match source_len(&pulled.module) {
                        Some(size) if size > max.bytes() => {
                            Err(crate::registry::RegistryError::TooLarge { size, max })
                        }
                        _ => Ok(pulled),
                    }
                });
                (reference, name, pulled)
            });
        }
        let mut pulled = BTreeMap::new();
        let mut failed = Vec::new();
        while let Some(done) = pulls.join_next().await {
            let Ok((reference, name, result)) = done else { continue };
            match result {
                Ok(module) => {
                    log_resolution(&reference, &module);
                    pulled.insert(reference, module);
                }
                Err(error) => failed.push(ConfigError::caused(
                    &loaded.file,
                    format!("workers.{name}.module"),
                    error,
                )),
            }
        }
        if !failed.is_empty() {
            return Err(ConfigError::all(&loaded.file, failed));
        }
        Ok(pulled)
    }

    /// The manifest each `oci://` module resolved to: pulled now, or carried over on a deploy.
    fn manifests(&self, pulled: &BTreeMap<String, Pulled>) -> BTreeMap<String, Digest> {
        let modules = self.loaded.config.workers.values().map(|w| &w.module);
        modules
            .filter_map(|module| {
                let manifest = match pulled.get(module) {
                    Some(pulled) => pulled.manifest.clone(),
                    None => self.previous?.pulled.get(module)?.clone(),
                };
                Some((module.clone(), manifest))
            })
            .collect()
    }

    /// Every worker, with its keys, KV namespaces, fetcher and image grant, checked
    /// ([`Runtime::prepare`]: a module the previous snapshot serves from the same unchanged
    /// file is not read again, one the module cache records as checked is not compiled, any
    /// other is compiled and instantiated once). Every worker is tried, so that one run names
    /// every module that does not load.
    async fn load_workers(
        &self,
        kv: &Kv,
        upstreams: &HashMap<String, Arc<Upstream>>,
        fetch_pools: &Arc<FetchPools>,
        pulled: &BTreeMap<String, Pulled>,
        background: &mut Background,
    ) -> Result<BTreeMap<String, (Worker, Arc<[String]>)>, ConfigError> {
        let loaded = self.loaded;
        let started = Instant::now();
        let mut workers = BTreeMap::new();
        let mut failed = Vec::new();
        let (mut unchanged, mut recorded, mut compiled) = (0usize, 0usize, 0usize);
        for (name, worker) in &loaded.config.workers {
            let key = format!("workers.{name}.module");
            let previous = self.previous.and_then(|p| p.workers.get(name));
            let owner = loaded.owner(name);
            let grants = loaded.allowance(&owner).map(|(grants, _)| grants);
            let loading = async {
                let source = module_source(loaded, &worker.module, self.builtins, pulled, previous)
                    .map_err(|e| ConfigError::caused(&loaded.file, &key, e))?;
                let keys = match &worker.jwt {
                    Some(jwt) => {
                        let at = format!("workers.{name}.jwt");
                        let loaded_keys =
                            crate::capability::keyring::load(loaded, &at, jwt, grants).await?;
                        background.0.extend(loaded_keys.tasks);
                        Some(loaded_keys.keys)
                    }
                    None => None,
                };
                let spec = WorkerSpec {
                    name,
                    source,
                    // Native code only from the operator's own file: never from the admin API
                    // or a registry.
                    native_code: owner == Owner::File
                        && crate::config::names_a_file(&worker.module),
                    limits: worker.limits.guest.clone(),
                    config: worker_config(worker),
                    keys,
                    kv: worker.kv.iter().map(|ns| kv.namespaces[ns].clone()).collect(),
                    fetcher: fetcher(name, worker, upstreams, fetch_pools, grants),
                    image: worker.image.as_ref().map(Into::into),
                };
                let prepared = match previous {
                    Some(previous) if self.deploying.is_some_and(|d| d != name) => {
                        self.runtime.carry(spec, previous).await
                    }
                    previous => self.runtime.prepare(spec, previous).await,
                };
                prepared.map_err(|source| {
                    let error = match source {
                        LoadError::Unreadable { path, source } => {
                            ModuleError::Read { path, source }
                        }
                        source => ModuleError::Load { module: worker.module.clone(), source },
                    };
                    ConfigError::caused(&loaded.file, &key, error)
                })
            };
            let prepared = match loading.await {
                Ok(prepared) => prepared,
                Err(error) => {
                    failed.push(error);
                    continue;
                }
            };
            match prepared.checked() {
                Checked::Unchanged => unchanged += 1,
                Checked::Recorded => recorded += 1,
                Checked::Loaded(cache) => {
                    compiled += 1;
                    tracing::info!(
                        worker = %name,
                        module = %worker.module,
                        digest = prepared.short_digest(),
                        ?cache,
                        "worker checked: compiled and instantiated once"
                    );
                }
            }
            workers
                .insert(name.clone(), (prepared, Arc::<[String]>::from(worker.upstreams.clone())));
        }
        if !failed.is_empty() {
            return Err(ConfigError::all(&loaded.file, failed));
        }
        tracing::info!(
            workers = workers.len(),
            unchanged,
            recorded,
            compiled,
            took_ms = started.elapsed().as_millis() as u64,
            "workers checked"
        );
        Ok(workers)
    }

    /// The keys of each route whose `identity` has its own `jwt` table, by route index.
    async fn load_route_keys(
        &self,
        background: &mut Background,
    ) -> Result<HashMap<usize, Keys>, ConfigError> {
        let mut keys = HashMap::new();
        for (i, route) in self.loaded.config.routes.iter().enumerate() {
            let Some(jwt) = route.identity.as_ref().and_then(|identity| identity.jwt.as_ref())
            else {
                continue;
            };
            let at = format!("routes[{i}].identity.jwt");
            // A deployed route's keys are its worker's deployer's to grant.
            let owner = route.worker.as_deref().map_or(Owner::File, |w| self.loaded.owner(w));
            let grants = self.loaded.allowance(&owner).map(|(grants, _)| grants);
            let loaded = crate::capability::keyring::load(self.loaded, &at, jwt, grants).await?;
            background.0.extend(loaded.tasks);
            keys.insert(i, loaded.keys);
        }
        Ok(keys)
    }

    /// Each worker's share of the instance slots: the previous snapshot's where its
    /// `max_concurrency` is unchanged (with the requests that hold it), else a new one.
    fn shares(&self) -> HashMap<String, Share> {
        let previous = self.previous.map(|p| &p.shares);
        let workers = self.loaded.config.workers.iter();
        let wanted = workers.filter_map(|(name, w)| Some((name, w.max_concurrency?)));
        wanted
            .map(|(name, places)| {
                let kept = previous.and_then(|p| p.get(name)).filter(|s| s.places == places);
                let share = kept.cloned().unwrap_or_else(|| Share {
                    places,
                    semaphore: Arc::new(Semaphore::new(places as usize)),
                });
                (name.clone(), share)
            })
            .collect()
    }

    /// Each rate-limit policy: the previous snapshot's where its table is unchanged (with its
    /// counts), else a new one.
    fn rate_limits(&self) -> Result<HashMap<String, Arc<Policy>>, ConfigError> {
        let previous = self.previous.map(|p| &p.rate_limits);
        self.loaded
            .config
            .rate_limits
            .iter()
            .map(|(name, config)| {
                let kept = previous.and_then(|p| p.get(name)).filter(|p| p.is(config));
                let policy = match kept {
                    Some(policy) => policy.clone(),
                    None => Arc::new(Policy::new(name, config, self.loaded)?),
                };
                Ok((name.clone(), policy))
            })
            .collect()
    }

    /// The routes, each with its target and metrics.
    fn compile_routes(
        &self,
        compiled: &Compiled<'_>,
        route_keys: &HashMap<usize, Keys>,
        rate_limits: &HashMap<String, Arc<Policy>>,
        tenants: &Tenants,
    ) -> Router<Target> {
        let Compiled { workers, upstreams, shares } = *compiled;
        let config = &self.loaded.config;
        let server_limit = config.server.max_request_body.bytes();
        // Validation made sure each route names workers and upstreams that exist.
        let worker = |name: &str| {
            let (worker, grants) = workers[name].clone();
            let body_limit = config.workers[name].limits.request_body.bytes().min(server_limit);
            let share = shares.get(name).cloned();
            Action::Worker(WorkerTarget { worker, share, body_limit, grants })
        };
        let upstream = |name: &str| {
            Action::Upstream(UpstreamTarget {
                upstream: upstreams[name].clone(),
                body_limit: server_limit,
            })
        };
        Router::new(&config.routes, |name, route| {
            let action = match (&route.respond, &route.upstream, &route.split, &route.worker) {
                (Some(respond), ..) => Action::Respond(fixed_response(respond)),
                (_, Some(name), ..) => upstream(name),
                (.., Some(split), _) => {
                    let targets = split
                        .targets
                        .iter()
                        .map(|t| SplitTarget {
                            action: match (&t.worker, &t.upstream) {
                                (Some(w), _) => worker(w),
                                (None, u) => upstream(u.as_deref().unwrap_or_default()),
                            },
                            route: name.to_owned(),
                            name: t.name.clone(),
                            decided: CountsBy::new(
                                "edgegate_split_total",
                                &[("route", name.to_owned()), ("target", t.name.clone())],
                            ),
                            fallbacks: Default::default(),
                        })
                        .collect();
                    // Validation made sure `jwt` names a worker with a `[workers.W.jwt]`.
                    let claims = split.jwt.as_ref().and_then(|w| {
                        let keys = workers[w].0.keys()?.clone();
                        let policy = config.workers[w].jwt.as_ref()?;
                        Some(ClaimSource::new(keys, policy, "edgegate_split_claims_total", name))
                    });
                    Action::Split(Arc::new(Split::new(split, name, targets, claims)))
                }
                (.., w) => worker(w.as_deref().unwrap_or_default()),
            };
            let label = match &action {
                Action::Worker(target) => target.worker.name().to_owned(),
                _ => "-".to_owned(),
            };
            // Validation made sure an identity has its own keys or names a worker with some.
            let identity = route.identity.as_ref().and_then(|identity| {
                let (keys, policy) = match (&identity.worker, &identity.jwt) {
                    (Some(w), _) => (workers[w].0.keys()?.clone(), config.workers[w].jwt.as_ref()?),
                    (None, Some(policy)) => {
                        let index = config.routes.iter().position(|r| std::ptr::eq(r, route))?;
                        (route_keys.get(&index)?.clone(), policy)
                    }
                    (None, None) => return None,
                };
                let source = ClaimSource::new(keys, policy, "edgegate_route_identity_total", name);
                Some(Arc::new(Identity::new(source, &identity.claims)))
            });
            // Validation made sure each name is a policy.
            let rate_limits = route
                .rate_limits
                .iter()
                .filter_map(|policy| {
                    Some(RouteLimit::new(rate_limits.get(policy)?.clone(), policy, name))
                })
                .collect();
            // A deployed route serves its own worker only: its tenant is that worker's.
            let tenant = route.worker.as_deref().and_then(|w| {
                let owner = self.loaded.owner(w);
                tenants.get(owner.tenant()?).cloned()
            });
            let tenant_name = tenant.as_ref().map(|t| t.name.as_str());
            let metrics = Arc::new(RouteMetrics::new(name, &label, tenant_name));
            Target { action, metrics, identity, rate_limits, tenant }
        })
        .with_tables(self.loaded.reserved_hosts())
    }
}

/// What the routes are compiled against: the workers, upstreams and shares just built.
#[derive(Clone, Copy)]
pub(super) struct Compiled<'a> {
    workers: &'a BTreeMap<String, (Worker, Arc<[String]>)>,
    upstreams: &'a HashMap<String, Arc<Upstream>>,
    shares: &'a HashMap<String, Share>,
}

/// Whether worker `name` of `loaded` differs from the one `previous` serves: a new worker, a
/// new module (by digest), or a changed `[workers.NAME]` table.
pub(super) fn changed(previous: &Snapshot, loaded: &Loaded, name: &str, worker: &Worker) -> bool {
    let Some(before) = previous.workers.get(name) else { return true };
    before.module_info().digest != worker.module_info().digest
        || previous.loaded.config.workers.get(name) != loaded.config.workers.get(name)
}

/// A route's fixed answer, built once.
fn fixed_response(respond: &RespondConfig) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(respond.body.clone()));
    // Validation checked both.
    *response.status_mut() = http::StatusCode::from_u16(respond.status).unwrap_or_default();
    let content_type = match &respond.content_type {
        Some(given) => HeaderValue::from_str(given).ok(),
        None if respond.body.is_empty() => None,
        None => Some(HeaderValue::from_static("text/plain; charset=utf-8")),
    };
    if let Some(content_type) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    response
}

/// The worker's fetcher, if it may fetch anything: its granted upstreams and its `fetch`
/// origins (both checked by validation), each with where it may connect: anywhere for the
/// configuration file's workers, where its deployer's `grants` let it for a deployed one.
fn fetcher(
    name: &str,
    worker: &WorkerConfig,
    upstreams: &HashMap<String, Arc<Upstream>>,
    pools: &Arc<FetchPools>,
    grants: Option<&Grants>,
) -> Option<Arc<dyn Fetcher>> {
    if worker.upstreams.is_empty() && worker.fetch.is_empty() {
        return None;
    }
    let granted = worker
        .upstreams
        .iter()
        .filter_map(|name| Some((name.clone(), upstreams.get(name)?.clone())))
        .collect();
    let origins = worker
        .fetch
        .iter()
        .filter_map(|o| Origin::parse(o).ok())
        .filter_map(|origin| {
            let reach = match grants {
                None => Reach::Anywhere,
                // Admission made sure every origin is granted.
                Some(grants) => grants.reach(&origin)?,
            };
            Some((origin, reach))
        })
        .collect();
    let counts = crate::capability::fetch::Outcome::counters(name);
    let pools = pools.clone();
    Some(Arc::new(WorkerFetcher { upstreams: granted, origins, pools, counts }))
}

/// The module cache's directory, if `[runtime] cache` is on: pulled modules are kept in its
/// `oci/`.
fn cache_dir(loaded: &Loaded) -> Option<std::path::PathBuf> {
    if !loaded.config.runtime.cache {
        return None;
    }
    match &loaded.config.runtime.cache_dir {
        Some(dir) => Some(loaded.resolve(dir)),
        None => ModuleCache::default_dir(),
    }
}

fn open_cache(loaded: &Loaded) -> Option<ModuleCache> {
    let dir = cache_dir(loaded)?;
    let runtime = &loaded.config.runtime;
    let pruning =
        Pruning { max_age: runtime.cache_max_age, max_size: runtime.cache_max_size.bytes() };
    match ModuleCache::open(&dir) {
        Ok(cache) => Some(cache.with_pruning(pruning)),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "module cache unavailable, compiling every start: {e}");
            None
        }
    }
}

/// How many references are resolved at once.
const PULL_CONCURRENCY: usize = 16;

/// The size of a module's bytes, if they can be had without reading them.
fn source_len(source: &Source) -> Option<u64> {
    match source {
        Source::Bytes(bytes) => Some(bytes.len() as u64),
        Source::File(path) | Source::Pulled { path, .. } => {
            std::fs::metadata(path).ok().map(|m| m.len())
        }
    }
}

/// One line per reference: `info` for a module pulled now, `debug` for one already stored,
/// `warn` for one served as it last resolved because its registry is out of reach.
fn log_resolution(reference: &str, pulled: &Pulled) {
    let (manifest, module) = (&pulled.manifest, &pulled.layer);
    match &pulled.resolution {
        Resolution::Pulled => {
            tracing::info!(reference, %manifest, %module, "module pulled from the registry")
        }
        Resolution::Stored => {
            tracing::debug!(reference, %manifest, %module, "reference resolved; module stored")
        }
        Resolution::Fallback(error) => tracing::warn!(
            reference,
            %manifest,
            %module,
            "registry out of reach: serving the digest this reference last resolved to, from the store: {}",
            crate::error::error_chain(error)
        ),
    }
}

/// Why a worker's module did not load.
#[derive(Debug, thiserror::Error)]
enum ModuleError {
    /// `builtin:NAME` names no worker in the binary.
    #[error("no built-in worker `{name}` (built in: {known})")]
    NoBuiltin { name: String, known: String },
    /// The file cannot be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An `oci://` module that was not resolved (a failure of the steps above).
    #[error("not pulled")]
    NotPulled,
    /// The runtime refused the module.
    #[error("cannot load `{module}`")]
    Load {
        module: String,
        #[source]
        source: edgegate_runtime::LoadError,
    },
}

/// The demo origin's listener could not start.
#[derive(Debug, thiserror::Error)]
#[error("starting the demo origin")]
struct DemoOrigin(#[source] std::io::Error);

/// Where a worker's module comes from: a built-in's bytes, a pulled module (or, on a deploy
/// of another worker, the one `previous` serves), or a file beside the configuration (read by
/// [`Runtime::prepare`]).
fn module_source(
    loaded: &Loaded,
    module: &str,
    builtins: Builtins,
    pulled: &BTreeMap<String, Pulled>,
    previous: Option<&Worker>,
) -> Result<Source, ModuleError> {
    if module.starts_with(crate::registry::SCHEME) {
        return match (pulled.get(module), previous) {
            (Some(pulled), _) => Ok(pulled.module.clone()),
            (None, Some(previous)) => Ok(previous.source().clone()),
            (None, None) => Err(ModuleError::NotPulled),
        };
    }
    if let Some(name) = module.strip_prefix(crate::config::BUILTIN_PREFIX) {
        return builtins
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, wasm)| Source::Bytes(Bytes::from_static(wasm)))
            .ok_or_else(|| {
                let names: Vec<&str> = builtins.iter().map(|(n, _)| *n).collect();
                ModuleError::NoBuiltin { name: name.into(), known: names.join(", ") }
            });
    }
    Ok(Source::File(loaded.resolve(module.as_ref())))
}

/// The values a worker reads with `config_get`: its `config` table, plus its token policy as
/// the `jwt.*` keys `edgegate_sdk::jwt::Validation::from_config` reads.
fn worker_config(worker: &WorkerConfig) -> BTreeMap<String, String> {
    let mut config = worker.config.clone();
    if let Some(jwt) = &worker.jwt {
        config.extend(jwt_policy(jwt));
    }
    config
}

fn jwt_policy(jwt: &JwtConfig) -> impl Iterator<Item = (String, String)> {
    let mut policy = vec![
        ("jwt.leeway", jwt.leeway.as_secs().to_string()),
        ("jwt.required", jwt.required_claims.join(",")),
        ("jwt.max_token", jwt.max_token_bytes.bytes().to_string()),
    ];
    if let Some(issuer) = &jwt.issuer {
        policy.push(("jwt.issuer", issuer.clone()));
    }
    if !jwt.audiences.is_empty() {
        policy.push(("jwt.audiences", jwt.audiences.join(",")));
    }
    policy.into_iter().map(|(k, v)| (k.to_owned(), v))
}

/// The engine and pool settings `serve` uses for `config`: `edgegate compile` builds its
/// `.cwasm` files with the same, so `serve` accepts them.
pub fn runtime_config(config: &crate::config::Config) -> RuntimeConfig {
    RuntimeConfig {
        max_instances: config.server.max_concurrency,
        max_memory: config.runtime.max_worker_memory.bytes(),
        epoch_tick: config.runtime.epoch_tick,
        max_wasm_stack: config.runtime.max_wasm_stack.bytes() as usize,
        image_threads: config.runtime.image_threads,
        max_resident: config.runtime.max_resident,
        load_concurrency: config.runtime.load_concurrency.get(),
        memory_init_cow: config.runtime.memory_init == crate::config::MemoryInit::Cow,
        component_bounds_checks: config.runtime.component_bounds_checks,
        ..RuntimeConfig::default()
    }
}
