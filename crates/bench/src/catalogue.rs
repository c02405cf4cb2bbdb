//! The runtimes the lab compares: their names on the command line and in reports, and which
//! workloads each serves.
//!
//! | runtime | what runs | installed by |
//! |---|---|---|
//! | `edgegate` | `edgegate serve` with the bundled workers | this build |
//! | `edgegate-info` | `edgegate serve` at its default log level, an access line per request to a file (capacity plan) | this build |
//! | `edgegate-component` | `edgegate serve` with static-json and db-lookup as `wasi:http` components (on request) | this build |
//! | `node` | `node bench/node/server.mjs` (node:http, node:crypto, sharp) | `bench/node/install` |
//! | `workerd` | `workerd serve` of `bench/node/worker.mjs` (jpeg-js for the image) | `bench/node/install` |
//! | `native` | `edgegate bench-native`: the same logic on plain hyper, no Wasm | this build |
//! | `wasmtime-serve` | `wasmtime serve` 49 of `echo-json-component`, static-json only (on request) | `bench/wasmtime/install` |

use serde::{Deserialize, Serialize};

use crate::workload::Workload;

/// A runtime under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// edgegate: Rust workers in Wasm, a fresh instance per request.
    Edgegate,
    /// edgegate as shipped: the same configuration at its default log level (`info`), an
    /// access line per request, stderr to a file as a service manager would take it. The
    /// capacity plan runs it beside [`Self::Edgegate`] (the lab's `warn`); on request
    /// otherwise (`--runtimes edgegate-info`).
    EdgegateInfo,
    /// edgegate with the image path in pure Rust inside Wasm (`image-resize-wasm`), without
    /// the host's image capability: on request only (`--runtimes edgegate-wasm`), to show what
    /// the capability changes.
    EdgegateWasm,
    /// edgegate serving the static-json workload with `echo-json-component` and db-lookup with
    /// `kv-lookup-component`, the same logic as standard `wasi:http/proxy` components: on
    /// request only (`--runtimes edgegate-component`), to put a price on the component ABI.
    /// It serves no other workload (auth-check needs the core ABI's JWT host calls).
    EdgegateComponent,
    /// [`Self::EdgegateComponent`] as shipped: at the default log level, as
    /// [`Self::EdgegateInfo`] is [`Self::Edgegate`]. On request only
    /// (`--runtimes edgegate-component-info`).
    EdgegateComponentInfo,
    /// [`Self::Edgegate`] with a rate limit on every route, counted in the process: a rate no
    /// load reaches, keyed by the client's address, so the figures are a decision's cost. On
    /// request only (`--runtimes edgegate-rate-local`).
    EdgegateRateLocal,
    /// [`Self::EdgegateRateLocal`] with the limit shared in Redis: a `redis-server` the lab
    /// starts on the load generator's CPUs, as a fleet's Redis is on another machine. On
    /// request only (`--runtimes edgegate-rate-shared`).
    EdgegateRateShared,
    /// Node.js (V8), the machine's `node`.
    Node,
    /// workerd, Cloudflare's V8 isolate runtime.
    Workerd,
    /// The same logic as native Rust on hyper, no Wasm.
    Native,
    /// `wasmtime serve`, the Bytecode Alliance's reference host for `wasi:http` components,
    /// at its defaults, serving the same `echo-json-component` file as
    /// [`Self::EdgegateComponent`]: on request only (`--runtimes wasmtime-serve`), static-json
    /// only.
    WasmtimeServe,
}

impl Runtime {
    /// The ones a plan runs unless told otherwise, in report order.
    pub const ALL: [Self; 4] = [Self::Edgegate, Self::Node, Self::Workerd, Self::Native];

    /// Every runtime `--runtimes` accepts.
    pub const NAMED: [Self; 11] = [
        Self::Edgegate,
        Self::EdgegateInfo,
        Self::EdgegateWasm,
        Self::EdgegateComponent,
        Self::EdgegateComponentInfo,
        Self::EdgegateRateLocal,
        Self::EdgegateRateShared,
        Self::Node,
        Self::Workerd,
        Self::Native,
        Self::WasmtimeServe,
    ];

    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Edgegate => "edgegate",
            Self::EdgegateInfo => "edgegate-info",
            Self::EdgegateWasm => "edgegate-wasm",
            Self::EdgegateComponent => "edgegate-component",
            Self::EdgegateComponentInfo => "edgegate-component-info",
            Self::EdgegateRateLocal => "edgegate-rate-local",
            Self::EdgegateRateShared => "edgegate-rate-shared",
            Self::Node => "node",
            Self::Workerd => "workerd",
            Self::Native => "native",
            Self::WasmtimeServe => "wasmtime-serve",
        }
    }

    /// The runtime named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMED.into_iter().find(|r| r.name() == name)
    }

    /// Whether it is edgegate (any of its configurations).
    pub fn is_edgegate(self) -> bool {
        matches!(
            self,
            Self::Edgegate
                | Self::EdgegateInfo
                | Self::EdgegateWasm
                | Self::EdgegateComponent
                | Self::EdgegateComponentInfo
                | Self::EdgegateRateLocal
                | Self::EdgegateRateShared
        )
    }

    /// Whether it is edgegate serving its workloads through components.
    pub fn is_edgegate_component(self) -> bool {
        matches!(self, Self::EdgegateComponent | Self::EdgegateComponentInfo)
    }

    /// Whether it is edgegate at its default log level, writing an access line per request.
    pub fn logs_access(self) -> bool {
        matches!(self, Self::EdgegateInfo | Self::EdgegateComponentInfo)
    }

    /// Whether it serves `workload`: `edgegate-component` (and `-info`) serves static-json and
    /// db-lookup, `wasmtime-serve` static-json only, every other runtime them all.
    pub fn serves(self, workload: Workload) -> bool {
        match self {
            Self::EdgegateComponent | Self::EdgegateComponentInfo => {
                matches!(workload, Workload::StaticJson | Workload::DbLookup)
            }
            Self::WasmtimeServe => workload == Workload::StaticJson,
            _ => true,
        }
    }
}
