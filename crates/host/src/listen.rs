//! A connection's life before its requests reach the gateway: accepted ([`accept`]), held to
//! its deadlines ([`watchdog`]), through the TLS handshake ([`handshake`], with the
//! configuration and session binding of [`tls`]), then served request by request ([`serve`]).
//! [`conn`] is what the requests learn of their connection.

pub(crate) mod accept;
pub mod conn;
pub(crate) mod handshake;
pub(crate) mod serve;
pub(crate) mod tls;
pub(crate) mod watchdog;
