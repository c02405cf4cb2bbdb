//! `json-transform`: the json-transform workload. POST a JSON order; every line is priced from a
//! product catalog in a KV namespace (all SKUs in one `get_batch` call), and the answer is the
//! order's totals, per line and per category, as about 1 KiB of JSON.
//!
//! It is the lab's garbage-collection workload: a V8 service keeps such a catalog in its heap
//! (tens of MB live, which every major collection walks), while a worker keeps it in the host's
//! store and its own memory lives for one request. See [`order::summarize`] for the shape of
//! the answer.
//!
//! | answer | when |
//! |---|---|
//! | 200 | the summary |
//! | 400 `invalid_order` | not JSON, or not an order (see [`order::Refusal::InvalidOrder`]) |
//! | 405 | not a POST |
//! | 422 `too_many_items` | more than [`order::MAX_ITEMS`] lines |
//! | 422 `unknown_sku` | a SKU the catalog does not have (named in `sku`) |
//! | 500 `bad_catalog_entry` | a catalog value is not `{"category": …, "price": …}` |
//! | 503 `store_unavailable` | the store cannot answer, with `Retry-After: 1` |
//!
//! Configuration (`[workers.NAME.config]`, optional): `namespace`, the catalog's KV namespace
//! (default `catalog`), whose keys are SKUs and values JSON objects with at least a string
//! `category` and a whole `price` in cents.
//!
//! ```text
//! curl --data '{"order":1,"currency":"EUR","items":[{"sku":"SKU-000042","qty":2}]}' \
//!     localhost:8080/orders/summary
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;

pub mod order;

use edgegate_sdk::host::Config;
use edgegate_sdk::{HostError, Request, Response, kv};
use order::{Product, Refusal};

/// Why the catalog could not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogError {
    /// The store's error.
    Store(HostError),
    /// A value that is not a product.
    BadEntry,
}

/// The answer to a refused order.
fn refused(refusal: Refusal<CatalogError>) -> Response {
    match refusal {
        Refusal::InvalidOrder => Response::json_error(400, "invalid_order"),
        Refusal::TooManyItems => Response::json_error(422, "too_many_items"),
        Refusal::UnknownSku(sku) => {
            let mut body = Vec::with_capacity(40 + sku.len());
            body.extend_from_slice(br#"{"error":"unknown_sku","sku":"#);
            // A string always serializes.
            body.extend(serde_json_guest::to_vec(&sku).unwrap_or_default());
            body.push(b'}');
            Response::json(422, &body)
        }
        Refusal::Lookup(CatalogError::BadEntry) => Response::json_error(500, "bad_catalog_entry"),
        Refusal::Lookup(CatalogError::Store(HostError::Unavailable | HostError::Timeout)) => {
            Response::builder(503)
                .header("retry-after", "1")
                .header("content-type", "application/json")
                .body(br#"{"error":"store_unavailable"}"#)
        }
        Refusal::Lookup(CatalogError::Store(HostError::NotGranted)) => {
            Response::json_error(500, "namespace_not_granted")
        }
        Refusal::Lookup(CatalogError::Store(_)) => Response::json_error(500, "store_error"),
    }
}

/// Every SKU's product from the namespace, in one host call.
fn lookup(ns: kv::Namespace<'_>, skus: &[&str]) -> Result<Vec<Option<Product>>, CatalogError> {
    let keys: Vec<&[u8]> = skus.iter().map(|s| s.as_bytes()).collect();
    let values = ns.get_batch(&keys).map_err(CatalogError::Store)?;
    values
        .iter()
        .map(|value| match value {
            Some(json) => Product::from_json(json).map(Some).ok_or(CatalogError::BadEntry),
            None => Ok(None),
        })
        .collect()
}

/// Serves one request.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    let config = Config::load();
    let ns = kv::namespace(config.get("namespace").unwrap_or("catalog"));
    match order::summarize(req.body(), |skus| lookup(ns, skus)) {
        Ok(summary) => Response::json(200, &summary),
        Err(refusal) => refused(refusal),
    }
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    #[test]
    fn only_posts_of_orders_reach_the_store() {
        assert_eq!(handle(&TestRequest::new("GET", "/orders/summary").request()).status(), 405);
        let bad = TestRequest::new("POST", "/orders/summary").body(b"{");
        assert_eq!(handle(&bad.request()).status(), 400);
    }

    #[test]
    fn refusals_have_statuses_and_codes() {
        let unknown = refused(Refusal::UnknownSku("a\"b".into()));
        assert_eq!(unknown.status(), 422);
        assert_eq!(unknown.body(), br#"{"error":"unknown_sku","sku":"a\"b"}"#);
        assert_eq!(refused(Refusal::TooManyItems).status(), 422);
        let down = refused(Refusal::Lookup(CatalogError::Store(HostError::Timeout)));
        assert_eq!((down.status(), down.header("retry-after")), (503, Some(&b"1"[..])));
        assert_eq!(refused(Refusal::Lookup(CatalogError::BadEntry)).status(), 500);
        // Natively no namespace is granted.
        let order = br#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":1}]}"#;
        let req = TestRequest::new("POST", "/orders/summary").body(order);
        assert_eq!(handle(&req.request()).body(), br#"{"error":"namespace_not_granted"}"#);
    }
}
