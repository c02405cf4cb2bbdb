//! The edgegate server: configuration, routing, limits, listeners, admin and shutdown.
//!
//! * [`config::Loaded`] reads and checks `edgegate.toml`.
//! * [`Gateway::build`] loads its workers into an `edgegate_runtime::Runtime` and compiles its
//!   routes ([`route::router`]); [`Gateway::handle`] serves one `http::Request`, turning every failure
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
// Only a test asks glibc to return freed memory (`malloc_trim`); the gateway itself needs no
// `unsafe`.
#![cfg_attr(not(test), forbid(unsafe_code))]

mod atomic;
mod capability;
pub mod config;
pub mod demo;
pub mod error;
mod forward;
mod gateway;
mod listen;
pub mod observe;
pub mod registry;
pub mod route;
pub mod server;

#[cfg(test)]
mod tests;

pub use forward::upstream::UpstreamBody;
pub use gateway::{
    Builtins, DeployError, DeployRequest, Gateway, GuestBody, ReloadError, Reloaded, ResponseBody,
    Streamed, runtime_config,
};
pub use listen::conn::{ConnInfo, TlsInfo};
pub use route::shadow::Digested;
pub use server::{Server, shutdown_signal};
