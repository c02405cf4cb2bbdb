//! Header maps for unit tests anywhere in the crate: a leaf, importing nothing of the crate, so
//! that a module's tests can use it without importing the gateway the other tests drive.

/// A header map of `pairs`, in order (a name may repeat).
pub(crate) fn header_map(pairs: &[(&str, &str)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in pairs {
        map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    map
}
