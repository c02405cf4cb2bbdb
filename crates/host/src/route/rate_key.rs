//! What a rate-limit policy counts a request by: its key, built from the parts the policy
//! names (`ip`, `route`, `header:NAME`, `cookie:NAME`, `claim:NAME`).
//!
//! The client's address is the peer's, unless the peer is a trusted proxy
//! (`[server] trusted_proxies`): then it is the nearest address in the one header the proxies
//! write (`[server] client_address_header`: `X-Forwarded-For`, or `Forwarded: for=`) that is
//! not itself a trusted proxy, read from the right, the end the trusted proxies wrote. The
//! other header is never read, so a client cannot override the proxy's header by sending the
//! one the proxy does not write, and a client that is not a trusted proxy cannot choose its
//! key by sending either.
//!
//! A request that lacks a part (no such header, cookie or claim) has no key, and the policy
//! does not count it, as Envoy's descriptors do: pair such a policy with one by `ip`.

use std::net::IpAddr;

use edgegate_sdk::jwt::Jwt;
use http::HeaderMap;

use super::claims::claim_text;
use super::cookie;
use crate::config::{ClientAddressHeader, KeyPart};

/// The networks whose peers may say who the client is, and the header they say it in.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies {
    networks: Vec<ipnet::IpNet>,
    header: ClientAddressHeader,
}

impl TrustedProxies {
    pub(crate) fn new(networks: Vec<ipnet::IpNet>, header: ClientAddressHeader) -> Self {
        Self { networks, header }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: `peer`, or what trusted proxies in front of it say.
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.contains(peer) {
            return peer.to_canonical();
        }
        let mut hops = match self.header {
            ClientAddressHeader::XForwardedFor => x_forwarded_for(headers),
            ClientAddressHeader::Forwarded => forwarded_for(headers),
        };
        // From the right: the last hop a trusted proxy appended first.
        let mut client = peer.to_canonical();
        while let Some(hop) = hops.pop() {
            client = hop.to_canonical();
            if !self.contains(hop) {
                break;
            }
        }
        client
    }
}

/// The addresses the `Forwarded` headers' `for=` parameters list, in order; an element
/// whose `for` is not an address (`unknown`, an obfuscated name) is left out.
fn forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.eq_ignore_ascii_case("for").then(|| node_ip(value.trim_matches('"')))?
            })
        })
        .collect()
}

/// The addresses the `X-Forwarded-For` headers list, in order; a hop that is not an address
/// is left out.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|hop| node_ip(hop.trim()))
        .collect()
}

/// An address as `Forwarded` (RFC 7239 §6) or `X-Forwarded-For` write it: `192.0.2.1`,
/// `192.0.2.1:80`, `[2001:db8::1]`, `[2001:db8::1]:80`, or a bare IPv6 address.
fn node_ip(text: &str) -> Option<IpAddr> {
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    text.parse().ok().or_else(|| text.rsplit_once(':').and_then(|(ip, _port)| ip.parse().ok()))
}

/// What a key is built from.
pub(crate) struct Facts<'a> {
    /// The client's address ([`TrustedProxies::client`]).
    pub(crate) client: IpAddr,
    pub(crate) route: &'a str,
    pub(crate) headers: &'a HeaderMap,
    /// The token the route's identity verified, if it has one.
    pub(crate) token: Option<&'a Jwt>,
}

/// The key `parts` give the request `facts` describe, or `None` if it lacks one of them.
/// Each part is written as its length in decimal, `:`, and its bytes (an address as text), so
/// no two requests with different parts share a key, and a shared policy's keys read plainly
/// in Redis: `edgegate:rate:per-ip:9:192.0.2.1`.
pub(crate) fn key(parts: &[KeyPart], facts: &Facts<'_>) -> Option<Vec<u8>> {
    use std::io::Write;
    let mut key = Vec::with_capacity(32);
    for part in parts {
        // What the part is, when it is made here rather than borrowed from the request.
        let made: std::borrow::Cow<'_, str>;
        let value: &[u8] = match part {
            KeyPart::Ip => {
                made = std::borrow::Cow::Owned(facts.client.to_string());
                made.as_bytes()
            }
            KeyPart::Route => facts.route.as_bytes(),
            KeyPart::Header(name) => facts.headers.get(name.as_str())?.as_bytes(),
            KeyPart::Cookie(name) => cookie(facts.headers, name)?.as_bytes(),
            KeyPart::Claim(name) => {
                made = claim_text(facts.token?, name)?;
                made.as_bytes()
            }
        };
        write!(key, "{}:", value.len()).ok()?;
        key.extend_from_slice(value);
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::headers::header_map as headers;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_spoofed_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy() {
        let networks = vec!["10.0.0.0/8".parse().unwrap()];
        let trusted = TrustedProxies::new(networks, ClientAddressHeader::XForwardedFor);
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4")]);
        // A client on the internet: its own address, whatever it says.
        assert_eq!(trusted.client(ip("203.0.113.9"), &spoofed), ip("203.0.113.9"));
        assert_eq!(TrustedProxies::default().client(ip("10.0.0.1"), &spoofed), ip("10.0.0.1"));
        // Behind two trusted proxies: the nearest untrusted hop, from the right, so what the
        // client itself wrote first is not believed.
        let chain = headers(&[("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.1.1.1")]);
        assert_eq!(trusted.client(ip("10.0.0.1"), &chain), ip("198.51.100.7"));
        // Only trusted hops: the leftmost; none at all: the peer.
        let inside = headers(&[("x-forwarded-for", "10.9.9.9")]);
        assert_eq!(trusted.client(ip("10.0.0.1"), &inside), ip("10.9.9.9"));
        assert_eq!(trusted.client(ip("10.0.0.1"), &HeaderMap::new()), ip("10.0.0.1"));
        // An IPv4 peer seen as IPv6 (a dual-stack socket) is the same client.
        assert_eq!(trusted.client(ip("::ffff:10.0.0.1"), &chain), ip("198.51.100.7"));
    }

    #[test]
    fn only_the_header_the_proxies_write_is_read_when_both_are_present() {
        let networks = || vec!["10.0.0.0/8".parse().unwrap()];
        // The proxy appends to X-Forwarded-For; the client sent its own Forwarded.
        let both = headers(&[
            ("forwarded", "for=192.0.2.60;proto=http, for=\"[2001:db8::1]:4711\""),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        let xff = TrustedProxies::new(networks(), ClientAddressHeader::XForwardedFor);
        assert_eq!(xff.client(ip("10.0.0.1"), &both), ip("198.51.100.7"));
        // The proxy writes Forwarded (RFC 7239, quoted IPv6 with a port); the client's
        // X-Forwarded-For is not read.
        let forwarded = TrustedProxies::new(networks(), ClientAddressHeader::Forwarded);
        assert_eq!(forwarded.client(ip("10.0.0.1"), &both), ip("2001:db8::1"));
        let only_xff = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(forwarded.client(ip("10.0.0.1"), &only_xff), ip("10.0.0.1"));
        let unknown = headers(&[("forwarded", "for=unknown, for=192.0.2.9")]);
        assert_eq!(forwarded.client(ip("10.0.0.1"), &unknown), ip("192.0.2.9"));
    }

    #[test]
    fn keys_are_built_from_their_parts_and_absent_parts_give_none() {
        let map = headers(&[("x-api-key", "k1"), ("cookie", "a=1; session=s9")]);
        let facts = Facts { client: ip("192.0.2.1"), route: "api", headers: &map, token: None };
        let parse = |parts: &[&str]| -> Vec<KeyPart> {
            parts.iter().map(|p| KeyPart::parse(p).unwrap()).collect()
        };
        assert_eq!(key(&parse(&["ip"]), &facts).unwrap(), b"9:192.0.2.1");
        assert_eq!(key(&parse(&["ip", "route"]), &facts).unwrap(), b"9:192.0.2.13:api");
        assert!(key(&parse(&["header:x-api-key"]), &facts).unwrap().ends_with(b"k1"));
        assert!(key(&parse(&["cookie:session"]), &facts).unwrap().ends_with(b"s9"));
        assert_eq!(key(&parse(&["header:x-other"]), &facts), None);
        assert_eq!(key(&parse(&["cookie:none"]), &facts), None);
        assert_eq!(key(&parse(&["claim:sub"]), &facts), None, "no verified token, no key");
        // Parts cannot run into each other: "a" + "bc" is not "ab" + "c".
        let one = headers(&[("x-a", "a"), ("x-b", "bc")]);
        let two = headers(&[("x-a", "ab"), ("x-b", "c")]);
        let facts_of = |h| Facts { client: ip("192.0.2.1"), route: "r", headers: h, token: None };
        let parts = parse(&["header:x-a", "header:x-b"]);
        assert_ne!(key(&parts, &facts_of(&one)), key(&parts, &facts_of(&two)));
    }
}
