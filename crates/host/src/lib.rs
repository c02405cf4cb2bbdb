//! The edgegate server: configuration, routing, limits, listeners, admin and shutdown.
//!
//! * [`config::Loaded`] reads and checks `edgegate.toml`.
//! * [`Gateway::build`] loads its workers into an `edgegate_runtime::Runtime` and compiles its
//!   routes ([`router`]); [`Gateway::handle`] serves one `http::Request`, turning every failure
//!   into its status through [`error::ErrorKind`].
//! * Forward directives are proxied to `[upstreams]` through keep-alive pools (`upstream`),
//!   and JWT keys are loaded and kept fresh in the host (`keyring`).
//! * [`Server`] binds the listeners and runs until a shutdown signal, then drains.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use edgegate_host::{Gateway, Server, config::Loaded};
//! let loaded = Loaded::from_file("edgegate.toml".as_ref())?;
//! let gateway = Gateway::build(&loaded, &[]).await?;
//! let server = Server::bind(gateway, loaded.config.server.listen, loaded.config.server.admin, None).await?;
//! server.run(edgegate_host::shutdown_signal()?).await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod accept;
pub mod admin;
mod authority;
mod claims;
mod client;
pub mod config;
mod connection;
pub mod demo;
mod demo_origin;
pub mod demo_tls;
pub mod error;
mod fetch;
mod gateway;
mod handshake;
mod headers;
mod keyring;
mod kv;
mod listener;
pub mod metrics;
mod origin;
pub mod path;
mod pool;
pub mod router;
mod serve;
mod shadow;
pub mod size;
mod split;
mod tls;
mod trace;
mod upstream;
pub mod watch;

#[cfg(test)]
mod tests;

pub use gateway::{Builtins, Gateway, ReloadError, Reloaded, ResponseBody, runtime_config};
pub use listener::{Server, shutdown_signal};
pub use shadow::Digested;
pub use upstream::{ConnInfo, TlsInfo, UpstreamBody};
