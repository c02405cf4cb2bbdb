//! A route table compiled into the module: a sorted `static` slice searched by binary search.
//!
//! The table lives in the module's data segment, so a fresh instance has it at no cost: no
//! parsing, no allocation, one `O(log n)` search per request. [`StaticRoutes::new`] is a
//! `const fn` that checks at compile time that the keys are sorted and unique, so a table
//! that binary search would misread does not build.
//!
//! ```
//! use edgegate_sdk::router::StaticRoutes;
//! static UPSTREAMS: StaticRoutes<&str> =
//!     StaticRoutes::new(&[("billing", "billing-v2"), ("orders", "orders"), ("users", "users")]);
//! assert_eq!(UPSTREAMS.get("orders"), Some(&"orders"));
//! assert_eq!(UPSTREAMS.get("payments"), None);
//! ```
//!
//! ```compile_fail
//! use edgegate_sdk::router::StaticRoutes;
//! // Not sorted: refused while compiling.
//! static BAD: StaticRoutes<u8> = StaticRoutes::new(&[("b", 1), ("a", 2)]);
//! ```

use crate::json::JsonStr;

/// A sorted, duplicate-free table from string keys to values.
#[derive(Debug)]
pub struct StaticRoutes<V: 'static> {
    entries: &'static [(&'static str, V)],
}

/// `a < b`, byte-wise, usable in a `const fn`.
const fn less(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

impl<V> StaticRoutes<V> {
    /// A table over `entries`, which must be sorted by key with no key twice (checked at
    /// compile time when used in a `static` or `const`).
    pub const fn new(entries: &'static [(&'static str, V)]) -> Self {
        let mut i = 1;
        while i < entries.len() {
            assert!(less(entries[i - 1].0, entries[i].0), "route keys must be sorted and unique");
            i += 1;
        }
        Self { entries }
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries.binary_search_by(|(k, _)| k.cmp(&key)).ok().map(|i| &self.entries[i].1)
    }

    /// The value for a JSON string (a claim), compared after unescaping.
    pub fn get_json(&self, key: JsonStr<'_>) -> Option<&V> {
        match key.as_str() {
            Some(key) => self.get(key),
            // Escaped keys are rare: compare them decoded, entry by entry.
            None => self.entries.iter().find(|(k, _)| key.eq_str(k)).map(|(_, v)| v),
        }
    }

    /// The entries, in key order.
    pub fn entries(&self) -> &'static [(&'static str, V)] {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    static TABLE: StaticRoutes<u32> =
        StaticRoutes::new(&[("a", 1), ("ab", 2), ("b", 3), ("service-a", 4), ("service-b", 5)]);

    #[test]
    fn finds_every_key_and_nothing_else() {
        for (key, value) in TABLE.entries() {
            assert_eq!(TABLE.get(key), Some(value));
        }
        for missing in ["", "aa", "c", "service", "service-c", "A"] {
            assert_eq!(TABLE.get(missing), None, "{missing}");
        }
    }

    #[test]
    fn json_keys_compare_decoded() {
        let doc = json::parse(br#"["service-a","service\u002db","nope"]"#).unwrap();
        let json::Value::Array(items) = doc else { panic!() };
        let found: std::vec::Vec<Option<u32>> =
            items.iter().map(|v| TABLE.get_json(v.as_json_str().unwrap()).copied()).collect();
        assert_eq!(found, [Some(4), Some(5), None]);
    }

    #[test]
    fn const_order_check() {
        assert!(less("a", "b") && less("a", "ab") && !less("b", "a") && !less("a", "a"));
    }
}
