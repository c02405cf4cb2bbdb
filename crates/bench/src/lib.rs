//! The benchmark lab behind `edgegate bench`: edgegate against Node.js, workerd and native
//! Rust on the same workloads, measured the same way, reproducible with one command.
//!
//! * [`workload`]: the six workloads, their data, and the answer each runtime must give;
//!   [`orders`] is json-transform's catalog and orders.
//! * [`load`]: the open-loop constant-rate load generator (latency from each request's due
//!   time), with [`latency`] histograms.
//! * [`runtimes`]: starting, timing and stopping each runtime; [`native`] is the native one.
//! * [`affinity`] and [`procfs`]: CPU pinning, and the server's CPU time and memory.
//! * [`fake`]: a server of known cost, for the lab's own tests.
//! * [`lab`] runs a [`lab::Plan`] into [`results::Results`]; [`report`] and [`charts`]
//!   turn them into `results.json`, `report.md` and SVG charts; [`verdict`] says which
//!   differences are outside the noise.
//!
//! ```no_run
//! use edgegate_bench::{affinity::CpuPlan, lab, runtimes::Environment};
//! let env = Environment {
//!     edgegate: "target/release/edgegate".into(),
//!     node_dir: "bench/node".into(),
//!     wasmtime: "bench/wasmtime/bin/wasmtime".into(),
//!     work: "/tmp/lab/work".into(),
//!     tls: None,
//! };
//! let cpus = CpuPlan::new(&edgegate_bench::affinity::available_cpus()?, true);
//! let results = lab::run(&lab::Plan::quick(), &env, &cpus)?;
//! results.write("/tmp/lab".as_ref())?;
//! # Ok::<(), anyhow::Error>(())
//! ```

#![deny(missing_docs)]

pub mod affinity;
pub mod catalogue;
pub mod charts;
pub mod fake;
pub mod lab;
pub mod latency;
pub mod load;
pub mod native;
pub mod orders;
pub mod procfs;
pub mod report;
pub mod results;
pub mod runtimes;
pub mod server;
mod timer;
pub mod verdict;
pub mod workload;
