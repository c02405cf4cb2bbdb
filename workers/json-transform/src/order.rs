//! Pricing an order: parse it, look its lines up in a catalog, total them per category.
//!
//! ```text
//!  16 KiB order ─serde_json─▶ Order { order, currency, items: [{ sku, qty }] } (the rest skipped)
//!                                 │ every SKU at once
//!                                 ▼
//!                         lookup(&[sku]) ─▶ [Option<Product>]   (KV in the guest, a map natively)
//!                                 │
//!                                 ▼
//!  ~1 KiB summary ◀─serde_json─ Summary { lines, categories (by name), total }
//! ```
//!
//! The same code runs in the worker and in the lab's native comparator; only the lookup
//! differs. Money is in integer cents, so every runtime formats it the same way.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;

use serde_guest::{Deserialize, Serialize};
use serde_json_guest as serde_json;

/// The most lines an order may have: each is one key of the catalog lookup.
pub const MAX_ITEMS: usize = 64;

/// The longest SKU accepted, in bytes.
pub const MAX_SKU: usize = 64;

/// What an order must contain; every other field is read past.
#[derive(Debug, Deserialize)]
#[serde(crate = "serde_guest")]
struct Order<'a> {
    order: u64,
    #[serde(borrow)]
    currency: Cow<'a, str>,
    #[serde(borrow)]
    items: Vec<Item<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(crate = "serde_guest")]
struct Item<'a> {
    #[serde(borrow)]
    sku: Cow<'a, str>,
    qty: u32,
}

/// What pricing needs of a catalog entry; its other fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(crate = "serde_guest")]
pub struct Product {
    /// The category the line's total counts toward.
    pub category: String,
    /// The unit price, in cents.
    pub price: u64,
}

impl Product {
    /// A catalog entry from its JSON, or `None` when it lacks a category or a price.
    pub fn from_json(json: &[u8]) -> Option<Self> {
        serde_json::from_slice(json).ok()
    }
}

#[derive(Serialize)]
#[serde(crate = "serde_guest")]
struct Summary<'a> {
    order: u64,
    currency: &'a str,
    items: usize,
    units: u64,
    lines: Vec<Line<'a>>,
    categories: Vec<Category<'a>>,
    total: u64,
}

#[derive(Serialize)]
#[serde(crate = "serde_guest")]
struct Line<'a> {
    sku: &'a str,
    total: u64,
}

#[derive(Serialize)]
#[serde(crate = "serde_guest")]
struct Category<'a> {
    name: &'a str,
    units: u64,
    total: u64,
}

/// Why an order was not priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal<E> {
    /// Not JSON, or not an order: `order`, `currency` or `items` missing or of the wrong type,
    /// a line without a SKU (1 to [`MAX_SKU`] bytes) or a whole `qty`, a total past `u64`.
    InvalidOrder,
    /// More than [`MAX_ITEMS`] lines.
    TooManyItems,
    /// A SKU the catalog does not have.
    UnknownSku(String),
    /// The lookup failed.
    Lookup(E),
}

/// Prices the order in `body`, looking every SKU up with one call of `lookup` (which answers
/// in the order asked), and returns the summary as JSON:
///
/// ```text
/// {"order":48213,"currency":"EUR","items":20,"units":57,
///  "lines":[{"sku":"SKU-012345","total":3702},…],
///  "categories":[{"name":"books","units":5,"total":12345},…],   (sorted by name)
///  "total":123456}
/// ```
pub fn summarize<P, E>(
    body: &[u8],
    lookup: impl FnOnce(&[&str]) -> Result<Vec<Option<P>>, E>,
) -> Result<Vec<u8>, Refusal<E>>
where
    P: Borrow<Product>,
{
    let order: Order<'_> = serde_json::from_slice(body).map_err(|_| Refusal::InvalidOrder)?;
    if order.items.len() > MAX_ITEMS {
        return Err(Refusal::TooManyItems);
    }
    if order.items.iter().any(|i| i.sku.is_empty() || i.sku.len() > MAX_SKU) {
        return Err(Refusal::InvalidOrder);
    }
    let skus: Vec<&str> = order.items.iter().map(|i| i.sku.as_ref()).collect();
    let products = lookup(&skus).map_err(Refusal::Lookup)?;
    let mut lines = Vec::with_capacity(skus.len());
    let mut categories: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let (mut units, mut total) = (0u64, 0u64);
    for (i, item) in order.items.iter().enumerate() {
        let Some(product) = products.get(i).and_then(Option::as_ref).map(Borrow::borrow) else {
            return Err(Refusal::UnknownSku(item.sku.clone().into_owned()));
        };
        let qty = u64::from(item.qty);
        let line = product.price.checked_mul(qty).ok_or(Refusal::InvalidOrder)?;
        let category = categories.entry(product.category.as_str()).or_default();
        category.0 += qty;
        category.1 = category.1.checked_add(line).ok_or(Refusal::InvalidOrder)?;
        units += qty;
        total = total.checked_add(line).ok_or(Refusal::InvalidOrder)?;
        lines.push(Line { sku: &item.sku, total: line });
    }
    let summary = Summary {
        order: order.order,
        currency: &order.currency,
        items: skus.len(),
        units,
        lines,
        categories: categories
            .into_iter()
            .map(|(name, (units, total))| Category { name, units, total })
            .collect(),
        total,
    };
    serde_json::to_vec(&summary).map_err(|_| Refusal::InvalidOrder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    fn catalog(sku: &str) -> Option<Product> {
        let (category, price) = match sku {
            "A" => ("books", 1250),
            "B" => ("garden", 399),
            "C" => ("books", 100),
            _ => return None,
        };
        Some(Product { category: category.into(), price })
    }

    fn price(body: &str) -> Result<String, Refusal<()>> {
        summarize(body.as_bytes(), |skus| Ok(skus.iter().map(|s| catalog(s)).collect()))
            .map(|json| String::from_utf8(json).unwrap())
    }

    #[test]
    fn lines_are_priced_and_totalled_per_category_in_name_order() {
        let order = r#"{"customer":{"name":"Ada","tags":["x",{"y":null}]},"order":7,
            "items":[{"sku":"B","qty":2,"note":"gift"},{"sku":"A","qty":1},{"sku":"C","qty":3}],
            "currency":"EUR","shipping":{"method":"express"}}"#;
        assert_eq!(
            price(order).unwrap(),
            r#"{"order":7,"currency":"EUR","items":3,"units":6,"lines":[{"sku":"B","total":798},{"sku":"A","total":1250},{"sku":"C","total":300}],"categories":[{"name":"books","units":4,"total":1550},{"name":"garden","units":2,"total":798}],"total":2348}"#
        );
    }

    #[test]
    fn escaped_strings_are_read_and_written_back_escaped() {
        let order = r#"{"order":1,"currency":"E\u0055R","items":[{"sku":"\u0041","qty":1}]}"#;
        let summary = price(order).unwrap();
        assert!(summary.contains(r#""currency":"EUR""#), "{summary}");
        assert!(summary.contains(r#""sku":"A""#), "{summary}");
    }

    #[test]
    fn what_is_not_an_order_is_refused() {
        for bad in [
            "",
            "[]",
            r#"{"order":1,"currency":"EUR"}"#,
            r#"{"order":-1,"currency":"EUR","items":[]}"#,
            r#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":1.5}]}"#,
            r#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":-1}]}"#,
            r#"{"order":1,"currency":"EUR","items":[{"sku":"","qty":1}]}"#,
            r#"{"order":1,"currency":"EUR","items":[{"qty":1}]}"#,
            r#"{"order":1,"currency":"EUR","items":[]} trailing"#,
        ] {
            assert_eq!(price(bad), Err(Refusal::InvalidOrder), "{bad}");
        }
        let long = format!(
            r#"{{"order":1,"currency":"EUR","items":[{{"sku":"{}","qty":1}}]}}"#,
            "S".repeat(MAX_SKU + 1)
        );
        assert_eq!(price(&long), Err(Refusal::InvalidOrder));
    }

    #[test]
    fn too_many_lines_unknown_skus_and_overflow_are_refused() {
        let line = r#"{"sku":"A","qty":1}"#;
        let lines: Vec<&str> = core::iter::repeat_n(line, MAX_ITEMS + 1).collect();
        let order = format!(r#"{{"order":1,"currency":"EUR","items":[{}]}}"#, lines.join(","));
        assert_eq!(price(&order), Err(Refusal::TooManyItems));
        let fewer = format!(r#"{{"order":1,"currency":"EUR","items":[{}]}}"#, lines[1..].join(","));
        assert!(price(&fewer).is_ok());

        let unknown =
            r#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":1},{"sku":"Z","qty":1}]}"#;
        assert_eq!(price(unknown), Err(Refusal::UnknownSku("Z".into())));

        let huge = |_: &[&str]| {
            Ok::<_, ()>(alloc::vec![Some(Product { category: "x".into(), price: u64::MAX })])
        };
        let order = br#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":2}]}"#;
        assert_eq!(summarize(order, huge), Err(Refusal::InvalidOrder));
    }

    #[test]
    fn a_failed_lookup_is_passed_on() {
        let order = br#"{"order":1,"currency":"EUR","items":[{"sku":"A","qty":1}]}"#;
        let failed = summarize::<Product, _>(order, |_| Err("down"));
        assert_eq!(failed, Err(Refusal::Lookup("down")));
    }

    #[test]
    fn catalog_entries_need_a_category_and_a_price() {
        let entry = br#"{"name":"Product 1","category":"books","price":1250,"stock":3}"#;
        assert_eq!(Product::from_json(entry), catalog("A"));
        assert_eq!(Product::from_json(br#"{"category":"books"}"#), None);
        assert_eq!(Product::from_json(br#"{"category":"books","price":"1"}"#), None);
    }
}
