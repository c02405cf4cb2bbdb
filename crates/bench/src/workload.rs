//! The six workloads and the data they send: the same requests to every runtime, and the
//! answers every runtime must give.
//!
//! | workload | request | a correct answer |
//! |---|---|---|
//! | `static-json` | `POST /echo`, 1 KiB of JSON | the same bytes (keys already sorted) |
//! | `auth-check` | `GET /auth/orders`, an HS256 bearer token | a 128-byte JSON routing decision |
//! | `db-lookup` | `GET /kv/user:N`, N cycling 1–100 | the 256-byte profile stored under it |
//! | `json-transform` | `POST /orders/summary`, a 16 KiB JSON order (16 in turn) | its 1 KiB summary, priced from a 100 000-product catalog ([`crate::orders`]) |
//! | `image-resize` | `POST /resize`, a 1600×1200 JPEG | a 640×480 JPEG |
//! | `mixed` | the four above in turn, 25 % each | as above |

use std::time::{SystemTime, UNIX_EPOCH};

use base64ct::{Base64UrlUnpadded, Encoding};
use bytes::Bytes;
/// The image-resize input, which the lab writes out with `edgegate bench --write-image`.
pub use edgegate_testkit::photo;
use http::{HeaderName, HeaderValue, Method, Uri};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::load::RequestTemplate;

/// The HS256 secret every runtime verifies the bench token with.
pub const SECRET: &str = "edgegate-bench-hs256-secret-0123456789";
/// The issuer the bench token carries and every runtime requires.
pub const ISSUER: &str = "edgegate-bench";
/// How many profiles the db-lookup store holds.
pub const PROFILES: usize = 100;
/// The image-resize output size (the input is [`edgegate_testkit::photo`]).
pub const RESIZED: (u16, u16) = (640, 480);

/// One workload.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Validate and echo 1 KiB of JSON.
    #[default]
    StaticJson,
    /// Verify an HS256 JWT and decide its route.
    AuthCheck,
    /// Read a 256-byte value by key from memory.
    DbLookup,
    /// Price a 16 KiB JSON order from a 100 000-product catalog: the garbage-collection one.
    JsonTransform,
    /// Downscale a 2-megapixel JPEG to 640×480.
    ImageResize,
    /// 25 % of each.
    Mixed,
}

impl Workload {
    /// All of them, in report order.
    pub const ALL: [Self; 6] = [
        Self::StaticJson,
        Self::AuthCheck,
        Self::DbLookup,
        Self::JsonTransform,
        Self::ImageResize,
        Self::Mixed,
    ];

    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::StaticJson => "static-json",
            Self::AuthCheck => "auth-check",
            Self::DbLookup => "db-lookup",
            Self::JsonTransform => "json-transform",
            Self::ImageResize => "image-resize",
            Self::Mixed => "mixed",
        }
    }

    /// The workload named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Whether a request takes milliseconds, not microseconds: such workloads run at their own
    /// (lower) rates and latency bound.
    pub fn heavy(self) -> bool {
        matches!(self, Self::ImageResize | Self::Mixed)
    }

    /// The single workloads this one is made of.
    pub fn parts(self) -> &'static [Self] {
        match self {
            Self::Mixed => &[Self::StaticJson, Self::AuthCheck, Self::DbLookup, Self::ImageResize],
            Self::StaticJson => &[Self::StaticJson],
            Self::AuthCheck => &[Self::AuthCheck],
            Self::DbLookup => &[Self::DbLookup],
            Self::JsonTransform => &[Self::JsonTransform],
            Self::ImageResize => &[Self::ImageResize],
        }
    }
}

/// What a correct answer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Status 200 and exactly these bytes.
    Body(Bytes),
    /// Status 200 and a JPEG of this width and height.
    Jpeg(u16, u16),
}

impl Expect {
    /// Why `status` and `body` are not a correct answer, if they are not.
    pub fn check(&self, status: u16, body: &[u8]) -> Result<(), String> {
        if status != 200 {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
            return Err(format!("status {status} ({text})"));
        }
        match self {
            Self::Body(want) if want.as_ref() == body => Ok(()),
            Self::Body(want) => Err(format!(
                "wrong body: {:?}, expected {:?}",
                String::from_utf8_lossy(&body[..body.len().min(200)]),
                String::from_utf8_lossy(&want[..want.len().min(200)])
            )),
            Self::Jpeg(w, h) => match jpeg_size(body) {
                Some(size) if size == (*w, *h) => Ok(()),
                Some((gw, gh)) => Err(format!("a {gw}×{gh} JPEG, expected {w}×{h}")),
                None => Err(format!("not a JPEG ({} bytes)", body.len())),
            },
        }
    }
}

/// The width and height in a JPEG's first start-of-frame marker.
pub fn jpeg_size(jpeg: &[u8]) -> Option<(u16, u16)> {
    if jpeg.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut at = 2;
    loop {
        let marker = *jpeg.get(at + 1)?;
        let len = usize::from(u16::from_be_bytes([*jpeg.get(at + 2)?, *jpeg.get(at + 3)?]));
        // SOF0–SOF15, except DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            let h = u16::from_be_bytes([*jpeg.get(at + 5)?, *jpeg.get(at + 6)?]);
            let w = u16::from_be_bytes([*jpeg.get(at + 7)?, *jpeg.get(at + 8)?]);
            return Some((w, h));
        }
        at += 2 + len;
    }
}

/// The data of every workload, generated the same way on every run.
#[derive(Debug, Clone)]
pub struct Fixtures {
    /// The static-json document: 1 KiB, keys sorted at every level, integers and strings.
    pub json: Bytes,
    /// The bearer token of auth-check.
    pub token: String,
    /// The auth-check answer: exactly 128 bytes.
    pub decision: Bytes,
    /// `(key, value)` for db-lookup: `user:1` to `user:100`, 256-byte JSON values.
    pub profiles: Vec<(String, Bytes)>,
    /// The image-resize input: a 1600×1200 JPEG.
    pub image: Bytes,
    /// json-transform's orders, each with its summary.
    pub orders: Vec<(Bytes, Bytes)>,
    /// json-transform's catalog, as KV seed lines (NDJSON).
    pub catalog: String,
}

impl Fixtures {
    /// Generates them; the token is valid for a day from now.
    pub fn generate() -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (token, decision) = token_and_decision(now);
        Self {
            json: json_document(),
            token,
            decision,
            profiles: profiles(),
            image: Bytes::from(photo::jpeg()),
            orders: crate::orders::orders(),
            catalog: crate::orders::catalog_ndjson(),
        }
    }

    /// The profiles as NDJSON (`{"key":…,"value":…}` per line), the seed edgegate loads.
    pub fn profiles_ndjson(&self) -> String {
        let mut out = String::new();
        for (key, value) in &self.profiles {
            let value: serde_json::Value = serde_json::from_slice(value).unwrap_or_default();
            out.push_str(&json!({ "key": key, "value": value }).to_string());
            out.push('\n');
        }
        out
    }

    /// The profiles as one JSON object of key to value (as a string), for the JS runtimes.
    pub fn profiles_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .profiles
            .iter()
            .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned().into()))
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// The requests of `workload`, each with its correct answer, in the order they are sent.
    pub fn requests(&self, workload: Workload) -> Vec<(RequestTemplate, Expect)> {
        match workload {
            Workload::StaticJson => vec![(
                template(Method::POST, "/echo", Some("application/json"), None, self.json.clone()),
                Expect::Body(self.json.clone()),
            )],
            Workload::AuthCheck => {
                let bearer = format!("Bearer {}", self.token);
                vec![(
                    template(Method::GET, "/auth/orders", None, Some(&bearer), Bytes::new()),
                    Expect::Body(self.decision.clone()),
                )]
            }
            Workload::DbLookup => self
                .profiles
                .iter()
                .map(|(key, value)| {
                    let path = format!("/kv/{key}");
                    (
                        template(Method::GET, &path, None, None, Bytes::new()),
                        Expect::Body(value.clone()),
                    )
                })
                .collect(),
            Workload::JsonTransform => self
                .orders
                .iter()
                .map(|(order, summary)| {
                    let json = Some("application/json");
                    (
                        template(Method::POST, "/orders/summary", json, None, order.clone()),
                        Expect::Body(summary.clone()),
                    )
                })
                .collect(),
            Workload::ImageResize => vec![(
                template(Method::POST, "/resize", Some("image/jpeg"), None, self.image.clone()),
                Expect::Jpeg(RESIZED.0, RESIZED.1),
            )],
            Workload::Mixed => {
                let parts: Vec<Vec<_>> =
                    Workload::Mixed.parts().iter().map(|&w| self.requests(w)).collect();
                let rounds = parts.iter().map(Vec::len).max().unwrap_or(0);
                (0..rounds)
                    .flat_map(|i| parts.iter().map(move |p| p[i % p.len()].clone()))
                    .collect()
            }
        }
    }
}

fn template(
    method: Method,
    path: &str,
    content_type: Option<&str>,
    authorization: Option<&str>,
    body: Bytes,
) -> RequestTemplate {
    let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let mut push = |name: HeaderName, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.push((name, value));
        }
    };
    if let Some(ct) = content_type {
        push(http::header::CONTENT_TYPE, ct);
    }
    if let Some(auth) = authorization {
        push(http::header::AUTHORIZATION, auth);
    }
    RequestTemplate {
        method,
        uri: path.parse().unwrap_or_else(|_| Uri::from_static("/")),
        headers,
        body,
        expect: 200,
    }
}

/// 1024 bytes of JSON whose keys are sorted at every level, so that a re-serializer that keeps
/// key order (JavaScript) and one that sorts keys (serde_json) both give back these bytes.
fn json_document() -> Bytes {
    let items: Vec<serde_json::Value> = (1..=8)
        .map(|i| {
            json!({"id": i, "name": format!("item-{i:02}"), "price": 1000 + i * 37, "qty": i % 3 + 1,
                   "sku": format!("SKU-{:06}", i * 7919)})
        })
        .collect();
    let mut doc = json!({"currency": "EUR", "items": items, "order": 48213, "pad": "",
                         "user": {"email": "ada@example.com", "id": 7, "name": "Ada"}});
    let len = doc.to_string().len();
    doc["pad"] = "x".repeat(1024usize.saturating_sub(len)).into();
    Bytes::from(doc.to_string())
}

/// The token, and the 128-byte answer every runtime gives for it: the subject is padded so
/// that the answer is exactly 128 bytes.
fn token_and_decision(now: u64) -> (String, Bytes) {
    let decision = |sub: &str| {
        format!(
            r#"{{"upstream":"service-a","set":{{"x-jwt-sub":"{sub}","x-jwt-scope":"read write"}}}}"#
        )
    };
    let short = decision("").len();
    let sub = format!("bench-{}", "u".repeat(128usize.saturating_sub(short + 6)));
    let header = Base64UrlUnpadded::encode_string(br#"{"alg":"HS256","typ":"JWT","kid":"bench"}"#);
    let claims = json!({"aud": "service-a", "exp": now + 86_400, "iat": now, "iss": ISSUER,
                        "scope": "read write", "sub": sub});
    let payload = Base64UrlUnpadded::encode_string(claims.to_string().as_bytes());
    let signing_input = format!("{header}.{payload}");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
    let signature = ring::hmac::sign(&key, signing_input.as_bytes());
    let token = format!("{signing_input}.{}", Base64UrlUnpadded::encode_string(signature.as_ref()));
    (token, Bytes::from(decision(&sub)))
}

/// `user:1` to `user:100`, each a JSON profile of exactly 256 bytes.
fn profiles() -> Vec<(String, Bytes)> {
    const PLANS: [&str; 3] = ["pro", "team", "enterprise"];
    (1..=PROFILES)
        .map(|i| {
            let mut value = json!({"bio": "", "email": format!("user{i}@example.com"), "id": i,
                                   "name": format!("User {i}"), "plan": PLANS[i % 3]});
            let len = value.to_string().len();
            let bio: String = "edgegate bench profile ".chars().cycle().take(256 - len).collect();
            value["bio"] = bio.into();
            (format!("user:{i}"), Bytes::from(value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_have_the_sizes_the_workloads_promise() {
        let f = Fixtures::generate();
        assert_eq!(f.json.len(), 1024);
        assert_eq!(f.decision.len(), 128);
        assert_eq!(f.profiles.len(), PROFILES);
        assert!(f.profiles.iter().all(|(_, v)| v.len() == 256));
        assert_eq!(jpeg_size(&f.image), Some(photo::SIZE));
        let ndjson = f.profiles_ndjson();
        assert_eq!(ndjson.lines().count(), PROFILES);
        let back: serde_json::Value = serde_json::from_str(ndjson.lines().next().unwrap()).unwrap();
        assert_eq!(back["value"].to_string().as_bytes(), f.profiles[0].1.as_ref());
    }

    #[test]
    fn the_json_document_survives_a_key_sorting_round_trip() {
        let json = json_document();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(serde_json::to_vec(&value).unwrap(), json.as_ref());
    }

    #[test]
    fn mixed_is_a_quarter_of_each() {
        let f = Fixtures::generate();
        let mixed = f.requests(Workload::Mixed);
        for path in ["/echo", "/auth/orders", "/resize"] {
            let n = mixed.iter().filter(|(t, _)| t.uri.path() == path).count();
            assert_eq!(n * 4, mixed.len(), "{path}");
        }
        assert_eq!(
            mixed.iter().filter(|(t, _)| t.uri.path().starts_with("/kv/")).count() * 4,
            mixed.len()
        );
        // In turn, so any window of four has one of each.
        assert_eq!(mixed[0].0.uri.path(), "/echo");
        assert_eq!(mixed[3].0.uri.path(), "/resize");
    }

    #[test]
    fn expectations_refuse_wrong_answers() {
        let body = Expect::Body(Bytes::from_static(b"{}"));
        assert!(body.check(200, b"{}").is_ok());
        assert!(body.check(200, b"{ }").is_err());
        assert!(body.check(500, b"{}").is_err());
        let jpeg = Expect::Jpeg(1600, 1200);
        assert!(jpeg.check(200, &photo::jpeg()).is_ok());
        assert!(Expect::Jpeg(640, 480).check(200, &photo::jpeg()).is_err());
        assert!(jpeg.check(200, b"\xFF\xD8 truncated").is_err());
    }

    #[test]
    fn the_token_verifies_with_the_secret() {
        let (token, _) = token_and_decision(1_700_000_000);
        let (input, sig) = token.rsplit_once('.').unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
        let sig = Base64UrlUnpadded::decode_vec(sig).unwrap();
        assert!(ring::hmac::verify(&key, input.as_bytes(), &sig).is_ok());
    }
}
