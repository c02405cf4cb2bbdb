//! The one Wasmtime [`Engine`] every worker shares, and the thread that ticks its epoch.
//!
//! The ticker ticks while requests run and for [`LINGER`] after the last one, then parks until
//! the next request starts ([`Activity`]): an idle gateway does not wake a thread a thousand
//! times a second.
//!
//! The engine uses the pooling instance allocator: at start it reserves `max_instances` slots,
//! each with room for one request of either ABI (a module's instance, linear memory (up to
//! `max_memory`) and table, or a component's few of each) and one async stack, so
//! instantiating is a slot lookup plus a copy-on-write mapping of the module's memory image,
//! not an `mmap` per request.
//!
//! ```text
//!  memory pool   ┌──────────── slot 0 ─────────────┬──────────── slot 1 ─────────────┬ …
//!                │ image (CoW) │ heap … ≤ max_mem  │ guard │ image (CoW) │ heap …      │
//!                └─────────────┴───────────────────┴───────┴─────────────┴─────────────┴
//!  on drop: keep the first 64 KiB resident (reset with pagemap_scan where the kernel has it,
//!           else memset), `madvise(DONTNEED)` the rest; the slot goes back to the free list.
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How the runtime's engine and instance pool are sized.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// **Instance slots** (default 256): how many requests can run a guest at once. Every
    /// in-flight request holds one slot from instantiation to drop. The host's concurrency limit
    /// must not exceed it; past it instantiation fails with `overloaded`.
    pub max_instances: u32,
    /// **Largest worker memory limit** (default 128 MiB): the size of each pool slot's linear
    /// memory. It is address space, not RAM: pages are only touched when a guest uses them.
    /// A worker whose memory limit is larger is refused at load.
    pub max_memory: u64,
    /// **Epoch tick** (default 1 ms): how often running guests are interrupted to check their
    /// CPU budget and deadline. A guest overruns its budget by at most about one tick; a
    /// shorter tick is more precise and wakes a thread more often.
    pub epoch_tick: Duration,
    /// **Wasm stack** (default 512 KiB): the native stack guest code may use. Deeper recursion
    /// traps with `stack_overflow`.
    pub max_wasm_stack: usize,
    /// **Wall clock**: what `clock_wall` reads, and so what token lifetimes are checked
    /// against. `SystemTime::now` unless a test pins it (the RFC 7515 example tokens
    /// expired in 2011).
    pub wall_clock: fn() -> std::time::SystemTime,
    /// **Image threads** (default: the CPUs the process may run on): how many image
    /// transforms run at once, process-wide, on tokio's blocking pool. A transform waits for
    /// one (within its request's deadline), so image work cannot take every blocking thread.
    pub image_threads: usize,
    /// **Resident modules** (default 1000): how many modules' compiled code is kept in
    /// memory. Past it, the least recently used is evicted, and its worker's next request
    /// loads it again (from the module cache, or compiled).
    pub max_resident: std::num::NonZeroUsize,
    /// **Loads at once** (default: the CPUs the process may run on): how many workers' code
    /// may load (read from the module cache, or compile) at the same time.
    pub load_concurrency: usize,
    /// **Copy-on-write memory images** (default true): a fresh instance maps its module's
    /// data as a copy-on-write image; a pool slot last used by another module is remapped.
    /// `false` copies the data segments into the slot instead: no remapping, so requests
    /// spread over many modules cost what requests to one do, at a copy of the module's
    /// data per request (docs/configuration.md#runtime).
    pub memory_init_cow: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_instances: 256,
            max_memory: 128 << 20,
            epoch_tick: Duration::from_millis(1),
            max_wasm_stack: 512 << 10,
            wall_clock: std::time::SystemTime::now,
            image_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_resident: std::num::NonZeroUsize::new(1000).unwrap_or(std::num::NonZeroUsize::MIN),
            load_concurrency: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_init_cow: true,
        }
    }
}

/// Bytes of each linear memory that stay resident between requests and are reset in place
/// instead of being returned to the kernel: the guest's stack and first heap pages, which
/// every request touches.
const KEEP_RESIDENT: usize = 64 << 10;

pub(crate) fn new_engine(config: &RuntimeConfig) -> wasmtime::Result<Engine> {
    let component = crate::meter::COMPONENT;
    // Every slot can hold a request of either ABI: a module (one instance, memory and table)
    // or a component (up to crate::meter::COMPONENT). Memories and tables are address
    // space until a request touches them.
    let slots = config.max_instances;
    let times = |n: usize| slots.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(times(component.instances))
        .total_component_instances(slots)
        .total_memories(times(component.memories))
        .total_tables(times(component.tables))
        .total_stacks(slots)
        .max_core_instances_per_component(component.instances as u32)
        .max_memories_per_component(component.memories as u32)
        .max_tables_per_component(component.tables as u32)
        .max_memories_per_module(1)
        .max_tables_per_module(1)
        .max_memory_size(usize::try_from(config.max_memory).unwrap_or(usize::MAX))
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .pagemap_scan(Enabled::Auto);

    let mut wasm = Config::new();
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true)
        .max_wasm_stack(config.max_wasm_stack)
        .memory_init_cow(config.memory_init_cow)
        .parallel_compilation(true);
    if std::env::var_os(PERF_MAP_ENV).is_some_and(|v| v == "1") {
        wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&wasm)
}

/// `EDGEGATE_PERF_MAP=1` names every compiled guest function in `/tmp/perf-PID.map`, so that
/// `perf report` shows guest code by function instead of as `[unknown]`.
pub(crate) const PERF_MAP_ENV: &str = "EDGEGATE_PERF_MAP";

/// How long the ticker keeps ticking after the last request before it parks.
pub(crate) const LINGER: Duration = Duration::from_millis(100);

/// Whether any request may be running guest code, and so needs the ticker: every request
/// holds an [`Active`] from before its instantiation until its store is dropped.
///
/// A request raises `running` and then reads `parked`; the ticker sets `parked` and then reads
/// `running` before it parks. All four are `SeqCst`, so at least one side sees the other: the
/// request wakes the ticker, or the ticker does not park. (An unpark before the park is kept
/// by the thread's token.)
#[derive(Debug, Default)]
pub(crate) struct Activity {
    running: AtomicUsize,
    parked: AtomicBool,
    /// The ticker thread, set by the thread itself before it can park.
    ticker: OnceLock<Thread>,
}

/// A request that may run guest code; the ticker ticks while one lives.
#[derive(Debug)]
pub(crate) struct Active<'a>(&'a Activity);

impl Activity {
    pub(crate) fn enter(&self) -> Active<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst)
            && let Some(ticker) = self.ticker.get()
        {
            ticker.unpark();
        }
        Active(self)
    }

    /// Whether the ticker is parked (or about to park).
    #[cfg(test)]
    pub(crate) fn parked(&self) -> bool {
        self.parked.load(Ordering::SeqCst)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Increments the engine's epoch every tick while requests run, until dropped.
#[derive(Debug)]
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    activity: Arc<Activity>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine, tick: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let activity = Arc::new(Activity::default());
        let engine = engine.weak();
        let linger = LINGER.as_nanos().div_ceil(tick.as_nanos().max(1));
        let thread = std::thread::Builder::new().name("edgegate-epoch".into()).spawn({
            let (stop, activity) = (stop.clone(), activity.clone());
            move || {
                let _ = activity.ticker.set(std::thread::current());
                let mut idle_ticks = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    if activity.running.load(Ordering::SeqCst) > 0 {
                        idle_ticks = 0;
                        continue;
                    }
                    idle_ticks += 1;
                    if idle_ticks < linger {
                        continue;
                    }
                    activity.parked.store(true, Ordering::SeqCst);
                    while activity.running.load(Ordering::SeqCst) == 0
                        && !stop.load(Ordering::Relaxed)
                    {
                        std::thread::park();
                    }
                    activity.parked.store(false, Ordering::SeqCst);
                    idle_ticks = 0;
                }
            }
        })?;
        Ok(Self { stop, activity, thread: Some(thread) })
    }

    /// What requests tell the ticker.
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
