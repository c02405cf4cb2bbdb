//! Where a worker's outbound connection may go, by how its origin was granted. A leaf: the
//! grants decide a worker's reach per origin, the pools' resolvers and the fetcher enforce it
//! on every address a connection would be made to, resolved names and literal addresses
//! alike, so a name that resolves to this host (`localhost.attacker.example`, a rebinding
//! DNS answer) is refused like the address itself.
//!
//! | how the origin was granted | may connect to |
//! |---|---|
//! | the operator's own worker (the configuration file) | anywhere |
//! | a grant naming the address itself (`http://127.0.0.1:8081`, `http://localhost:8081`) | anywhere |
//! | a grant naming the host (`https://api.example.com`) | anywhere but this host: no loopback, link-local or unspecified address, nor the admin listener |
//! | only a wildcard grant (`https://*.example.com`, `https://*`) | public addresses only |

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where a worker's fetches to one origin may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Reach {
    /// Anywhere.
    Anywhere,
    /// Anywhere but this host itself.
    Away,
    /// Public unicast addresses only.
    Public,
}

/// A [`Reach`] and the admin listener it keeps connections from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard {
    pub(crate) reach: Reach,
    /// The admin listener's address.
    pub(crate) admin: SocketAddr,
}

impl Guard {
    /// A guard that lets every connection through: the operator's own pools.
    pub(crate) fn none() -> Self {
        Self { reach: Reach::Anywhere, admin: SocketAddr::from(([0, 0, 0, 0], 0)) }
    }

    /// Whether a connection to `addr` is allowed.
    pub(crate) fn allows(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        match self.reach {
            Reach::Anywhere => true,
            Reach::Away => !this_host(ip) && !self.admin_listener(SocketAddr::new(ip, addr.port())),
            Reach::Public => public(ip) && !self.admin_listener(SocketAddr::new(ip, addr.port())),
        }
    }

    /// Whether `addr` is the admin listener: its port, at its address, or at any of this
    /// host's addresses when it listens on all of them.
    fn admin_listener(&self, addr: SocketAddr) -> bool {
        if addr.port() != self.admin.port() || self.admin.port() == 0 {
            return false;
        }
        let bound = self.admin.ip().to_canonical();
        addr.ip() == bound || (bound.is_unspecified() && (this_host(addr.ip()) || local(addr.ip())))
    }
}

/// Loopback, link-local or unspecified: an address that reaches this host (or its link).
fn this_host(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// Whether `ip` is one of this host's own addresses: one a socket can be bound to.
fn local(ip: IpAddr) -> bool {
    std::net::TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// A public unicast address: none of the private, shared, loopback, link-local, multicast,
/// documentation, benchmarking or reserved ranges.
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (b & 0xc0) == 64) // shared address space, 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments, 192.0.0.0/24
        || (a == 198 && (b & 0xfe) == 18) // benchmarking, 198.18.0.0/15
        || a >= 240) // reserved
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) carries an IPv4 address: judge that one.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation, 2001:db8::/32
        || s[0] == 0x0100 && s[1..4] == [0; 3]) // discard, 100::/64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(reach: Reach, admin: &str) -> Guard {
        Guard { reach, admin: admin.parse().unwrap() }
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn each_reach_allows_what_its_grant_says() {
        let admin = "127.0.0.1:9090";
        let anywhere = guard(Reach::Anywhere, admin);
        assert!(anywhere.allows(addr("127.0.0.1:9090")));
        let away = guard(Reach::Away, admin);
        for refused in [
            "127.0.0.1:80",
            "[::1]:80",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "[fe80::1]:80",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(!away.allows(addr(refused)), "{refused}");
        }
        assert!(away.allows(addr("10.1.2.3:80")), "a private address a name was granted for");
        assert!(away.allows(addr("93.184.215.14:443")));
        let public = guard(Reach::Public, admin);
        for refused in [
            "10.1.2.3:80",
            "172.16.0.1:80",
            "192.168.1.1:80",
            "100.64.0.1:80",
            "127.0.0.1:80",
            "169.254.169.254:80",
            "[fd00::1]:80",
            "[64:ff9b::a01:203]:80",
            "[2001:db8::1]:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
        ] {
            assert!(!public.allows(addr(refused)), "{refused}");
        }
        assert!(public.allows(addr("93.184.215.14:443")));
        assert!(public.allows(addr("[2606:4700::1111]:443")));
    }

    #[test]
    fn the_admin_listener_is_refused_at_any_of_this_host_s_addresses() {
        let on_all = guard(Reach::Away, "0.0.0.0:9090");
        // This host's own address on a private network, if it has one: `bind` says it is local.
        let own = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect("10.255.255.255:9").map(|()| s))
            .and_then(|s| s.local_addr())
            .map(|a| a.ip())
            .ok()
            .filter(|ip| !ip.is_unspecified() && !ip.is_loopback());
        if let Some(ip) = own {
            assert!(!on_all.allows(SocketAddr::new(ip, 9090)), "{ip}:9090 is the admin listener");
            assert!(on_all.allows(SocketAddr::new(ip, 8080)), "another port of it is not");
        }
        let bound = guard(Reach::Away, "10.9.9.9:9090");
        assert!(!bound.allows(addr("10.9.9.9:9090")));
        assert!(bound.allows(addr("10.9.9.8:9090")));
    }
}
