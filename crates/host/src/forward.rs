//! Requests the gateway sends on: proxied to `[upstreams]` ([`upstream`]) through keep-alive
//! pools ([`pool`]) of the outbound client ([`client`]), with the hop-by-hop rules of
//! [`headers`].

pub(crate) mod client;
pub(crate) mod headers;
pub(crate) mod pool;
pub(crate) mod upstream;
