//! End-to-end tests: the real `edgegate` binary over real loopback sockets.
//!
//! One test binary (link time dominates on small machines), one module per topic.

mod auth;
mod bench;
mod boundary;
mod cli;
mod component;
mod connections;
mod container;
mod demo;
mod deploy;
mod docs;
mod fleet;
mod hostile;
mod image;
mod kv;
mod limits;
mod logs;
mod observability;
mod rate_limits;
mod registry;
mod reload;
mod requests;
mod shutdown;
mod split;
mod structure;
mod support;
mod tenants;
mod tls;
mod toolchain;
