//! The json-transform workload's data: a 100 000-product catalog, 16 KiB orders, and the
//! summary every runtime must answer each order with.
//!
//! Everything is generated from a fixed seed, so every run sends the same bytes. The expected
//! summaries are computed here from the generated data, apart from the code under test (the
//! `json-transform` worker's [`summarize`](json_transform::order::summarize), which edgegate
//! and native Rust run, and `bench/node/workloads.mjs`, which Node.js and workerd run).
//!
//! | what | size |
//! |---|---|
//! | catalog | [`CATALOG_SIZE`] products, `SKU-000001` …: `{"name","category","price","stock","description"}`, about 190 bytes each |
//! | order | exactly [`ORDER_SIZE`] bytes: a customer, [`LINES`] lines, shipping, payment, a history of events |
//! | summary | about 1 KiB: a total per line and per category |

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use serde_json::json;

/// Products in the catalog.
pub const CATALOG_SIZE: usize = 100_000;
/// Lines in each order.
pub const LINES: usize = 20;
/// Bytes of each order.
pub const ORDER_SIZE: usize = 16 * 1024;
/// Distinct orders, sent in turn.
pub const ORDERS: usize = 16;

const CATEGORIES: [&str; 12] = [
    "audio", "baby", "books", "garden", "grocery", "kitchen", "music", "office", "outdoor", "pets",
    "sports", "toys",
];

/// SplitMix64: a fixed, well-spread function of `n`.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn sku(i: usize) -> String {
    format!("SKU-{i:06}")
}

/// Product `i` (1-based): its category and its price in cents.
fn product(i: usize) -> (&'static str, u64) {
    let h = mix(i as u64);
    (CATEGORIES[(h >> 40) as usize % CATEGORIES.len()], 99 + h % 49_901)
}

/// The catalog as KV seed lines (`{"key": SKU, "value": {…}}`), the form edgegate's seed,
/// the native comparator and the JS comparators all read.
pub fn catalog_ndjson() -> String {
    let mut out = String::with_capacity(CATALOG_SIZE * 220);
    for i in 1..=CATALOG_SIZE {
        let (category, price) = product(i);
        let h = mix(!(i as u64));
        let value = json!({
            "name": format!("Product {i:06}"),
            "category": category,
            "price": price,
            "stock": h % 500,
            "description": format!(
                "Product {i:06} from the {category} range: batch {}, shelf {}, supplier {}, \
                 packed in recycled cardboard.",
                h % 9973,
                (h >> 16) % 400,
                (h >> 32) % 1200
            ),
        });
        let _ = writeln!(out, "{}", json!({ "key": sku(i), "value": value }));
    }
    out
}

/// One order: its body, and the lines it holds as (product number, quantity).
fn order(n: usize) -> (Bytes, Vec<(usize, u32)>) {
    let h = |k: u64| mix((n as u64) << 32 | k);
    let lines: Vec<(usize, u32)> = (0..LINES as u64)
        .map(|k| (1 + (h(k) % CATALOG_SIZE as u64) as usize, 1 + (h(k) >> 50) as u32 % 5))
        .collect();
    let address = |k: u64| {
        json!({"street": format!("{} Long Road", 1 + h(k) % 400), "city": "Lyon", "zip": format!("{:05}", h(k) % 100_000),
               "country": "FR", "instructions": "Leave the parcel with the neighbour at number 14 if nobody answers."})
    };
    let items: Vec<serde_json::Value> = lines
        .iter()
        .enumerate()
        .map(|(k, &(i, qty))| {
            json!({"sku": sku(i), "qty": qty, "name": format!("Product {i:06}"),
                   "note": format!("line {k}: please check the packaging before it ships"),
                   "attributes": {"color": (["red", "blue", "green", "black"][k % 4]), "size": (["S", "M", "L"][k % 3]),
                                  "gift": k % 5 == 0, "engraving": null}})
        })
        .collect();
    let mut history = Vec::new();
    let mut doc = json!({
        "order": 50_000 + n, "currency": "EUR", "placed": "2026-12-04T10:15:00Z",
        "customer": {"id": 1000 + n, "name": "Ada Lovelace", "email": format!("customer{n}@example.com"),
                     "tier": "gold", "newsletter": true, "addresses": [address(100), address(101)]},
        "items": items,
        "shipping": {"method": "express", "cost": 499, "address": address(102)},
        "payment": {"method": "card", "brand": "visa", "last4": "4242", "authorized": true},
        "history": [], "pad": "",
    });
    // Events until the next one would not fit, then a pad string to the exact size.
    loop {
        let k = history.len() as u64;
        let event = json!({"at": format!("2026-12-04T10:{:02}:{:02}Z", k / 60 % 60, k % 60),
                           "event": (["viewed", "added", "removed", "updated"][k as usize % 4]),
                           "sku": sku(1 + (h(1000 + k) % CATALOG_SIZE as u64) as usize), "by": "web"});
        history.push(event);
        doc["history"] = history.clone().into();
        if doc.to_string().len() > ORDER_SIZE {
            history.pop();
            doc["history"] = history.into();
            break;
        }
    }
    let len = doc.to_string().len();
    doc["pad"] = "x".repeat(ORDER_SIZE - len).into();
    (Bytes::from(doc.to_string()), lines)
}

/// The summary of an order with `lines`, in the worker's field order.
fn summary(number: usize, lines: &[(usize, u32)]) -> Bytes {
    let mut categories: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let (mut units, mut total) = (0, 0);
    let mut out = String::new();
    for (k, &(i, qty)) in lines.iter().enumerate() {
        let (category, price) = product(i);
        let line = price * u64::from(qty);
        let c = categories.entry(category).or_default();
        c.0 += u64::from(qty);
        c.1 += line;
        units += u64::from(qty);
        total += line;
        let comma = if k == 0 { "" } else { "," };
        let _ = write!(out, r#"{comma}{{"sku":"{}","total":{line}}}"#, sku(i));
    }
    let per_category: Vec<String> = categories
        .iter()
        .map(|(name, (units, total))| {
            format!(r#"{{"name":"{name}","units":{units},"total":{total}}}"#)
        })
        .collect();
    Bytes::from(format!(
        r#"{{"order":{},"currency":"EUR","items":{},"units":{units},"lines":[{out}],"categories":[{}],"total":{total}}}"#,
        50_000 + number,
        lines.len(),
        per_category.join(",")
    ))
}

/// The orders, each with the summary every runtime must answer it with.
pub fn orders() -> Vec<(Bytes, Bytes)> {
    (0..ORDERS)
        .map(|n| {
            let (body, lines) = order(n);
            (body, summary(n, &lines))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use json_transform::order::{Product, summarize};

    #[test]
    fn orders_are_16_kib_and_their_summaries_about_1_kib() {
        let orders = orders();
        assert_eq!(orders.len(), ORDERS);
        for (body, summary) in &orders {
            assert_eq!(body.len(), ORDER_SIZE);
            assert!((900..1400).contains(&summary.len()), "{}", summary.len());
            let order: serde_json::Value = serde_json::from_slice(body).unwrap();
            assert_eq!(order["items"].as_array().unwrap().len(), LINES);
            assert!(order["history"].as_array().unwrap().len() > 50);
        }
    }

    #[test]
    fn the_worker_gives_the_expected_summaries() {
        let catalog: std::collections::HashMap<String, Product> = catalog_ndjson()
            .lines()
            .map(|line| {
                let entry: serde_json::Value = serde_json::from_str(line).unwrap();
                let value = entry["value"].to_string();
                (
                    entry["key"].as_str().unwrap().to_string(),
                    Product::from_json(value.as_bytes()).unwrap(),
                )
            })
            .collect();
        assert_eq!(catalog.len(), CATALOG_SIZE);
        for (body, expected) in orders() {
            let got = summarize(&body, |skus| {
                Ok::<_, ()>(skus.iter().map(|s| catalog.get(*s)).collect())
            })
            .unwrap();
            assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8_lossy(&expected));
        }
    }
}
