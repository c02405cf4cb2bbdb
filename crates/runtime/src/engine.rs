//! The Wasmtime engines every worker shares (one per ABI, [`Engines`]), and the thread that
//! ticks their epochs.
//!
//! The ticker ticks while requests run and for [`LINGER`] after the last one, then parks until
//! the next request starts ([`Activity`]): an idle gateway does not wake a thread a thousand
//! times a second.
//!
//! Each engine uses the pooling instance allocator: at start it reserves `max_instances` slots,
//! each with room for one request of its ABI (a module's instance, linear memory (up to
//! `max_memory`) and table, or a component's few of each) and one async stack, so
//! instantiating is a slot lookup plus a copy-on-write mapping of the module's memory image,
//! not an `mmap` per request. (The components' slots have no guard: [`Engines`] says why.)
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

use crate::code::compiled::Abi;
use crate::limits::meter::Shape;

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
    /// **Components' bounds checks** (default [`BoundsChecks::Explicit`]): components run on
    /// an engine and pool of their own, which check memory bounds in code and have no guard
    /// pages unless this says [`BoundsChecks::GuardPages`]. Core modules always have guard
    /// pages.
    pub component_bounds_checks: BoundsChecks,
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
            component_bounds_checks: BoundsChecks::Explicit,
        }
    }
}

/// Bytes of each linear memory that stay resident between requests and are reset in place
/// instead of being returned to the kernel: the guest's stack and first heap pages, which
/// every request touches.
const KEEP_RESIDENT: usize = 64 << 10;

/// The two engines: one for core modules, one for components, each with its own instance
/// pool of `max_instances` slots shaped for its ABI.
///
/// They differ in how a guest's memory accesses are checked. Core modules, which run the
/// lab's compute (JSON, JWT, images), keep Wasmtime's default: guard pages and signal-based
/// traps, no bounds check in the code. Components, by default, check bounds in the code
/// ([`BoundsChecks::Explicit`]) and have no guard pages: Rust's allocator grows a component's
/// memory on every request, and with guard pages Wasmtime must `mprotect` the slot back to
/// its initial size when the next request takes it, a TLB shootdown on every CPU the process
/// ran on. Without them the slot stays accessible (its pages are still reset and returned to
/// the kernel), and a component request costs 20–30 % less (docs/components.md#what-it-costs).
pub(crate) struct Engines {
    pub(crate) core: Engine,
    pub(crate) component: Engine,
}

impl Engines {
    pub(crate) fn new(config: &RuntimeConfig) -> wasmtime::Result<Self> {
        let (slots, checks) = (config.max_instances, config.component_bounds_checks);
        Ok(Self {
            core: new_engine(config, crate::limits::meter::MODULE, 0, BoundsChecks::GuardPages)?,
            component: new_engine(config, crate::limits::meter::COMPONENT, slots, checks)?,
        })
    }

    /// The engine that runs code of this ABI.
    pub(crate) fn of(&self, abi: Abi) -> &Engine {
        match abi {
            Abi::Core => &self.core,
            Abi::HttpComponent => &self.component,
        }
    }
}

/// How a component's memory accesses are kept in bounds (`[runtime] component_bounds_checks`:
/// `"explicit"` or `"guard-pages"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundsChecks {
    /// Checked by the compiled code; no guard pages, no signal handlers needed, and no
    /// `mprotect` when a slot is reused after its memory grew. The default for components.
    Explicit,
    /// Guard pages and signal-based traps, as core modules always use: cheaper compute, a
    /// costlier instantiation whenever the last instance in the slot grew its memory.
    GuardPages,
}

/// An engine whose pool has `config.max_instances` slots of `shape` each (and
/// `components` component instances).
fn new_engine(
    config: &RuntimeConfig,
    shape: Shape,
    components: u32,
    checks: BoundsChecks,
) -> wasmtime::Result<Engine> {
    // Memories and tables are address space until a request touches them.
    let slots = config.max_instances;
    let times = |n: usize| slots.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(times(shape.instances))
        .total_component_instances(components)
        .total_memories(times(shape.memories))
        .total_tables(times(shape.tables))
        .total_stacks(slots)
        .max_core_instances_per_component(shape.instances as u32)
        .max_memories_per_component(shape.memories as u32)
        .max_tables_per_component(shape.tables as u32)
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
    if checks == BoundsChecks::Explicit {
        // Wasmtime keeps a grown slot's pages accessible between instances only for a
        // memory that relies on no virtual-memory trick at all: no guard, no signals.
        wasm.signals_based_traps(false)
            .memory_guard_size(0)
            .memory_reservation(config.max_memory)
            .memory_reservation_for_growth(0);
    }
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
    pub(crate) fn start(engines: &Engines, tick: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let activity = Arc::new(Activity::default());
        let engines = [engines.core.weak(), engines.component.weak()];
        let linger = LINGER.as_nanos().div_ceil(tick.as_nanos().max(1));
        let thread = std::thread::Builder::new().name("edgegate-epoch".into()).spawn({
            let (stop, activity) = (stop.clone(), activity.clone());
            move || {
                let _ = activity.ticker.set(std::thread::current());
                let mut idle_ticks = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    for engine in &engines {
                        match engine.upgrade() {
                            Some(engine) => engine.increment_epoch(),
                            None => return,
                        }
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
