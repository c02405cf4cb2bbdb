//! Any bytes through the SDK's token check, with a verifier that accepts every signature so
//! the fuzzer reaches the claims: the bytes as a token; split at the first NUL into a header
//! and a claims text that are base64url-encoded into a token (so mutations explore the JSON
//! and the claim rules, not only base64); and as a JSON document. Nothing panics, and
//! whatever passes can be read completely.
#![no_main]

use edgegate_sdk::json;
use edgegate_sdk::jwt::{self, Alg, Error, Validation, Verifier};
use libfuzzer_sys::fuzz_target;

struct AcceptAll;

impl Verifier for AcceptAll {
    fn verify(&self, _: Alg, _: Option<&[u8]>, _: &[u8], _: &[u8]) -> Result<(), Error> {
        Ok(())
    }
}

fn check(token: &str) {
    let validation = Validation { required: Vec::new(), ..Validation::default() };
    if let Ok(jwt) = jwt::verify(token, &validation, &AcceptAll, 1_700_000_000) {
        for (key, value) in jwt.claims().iter() {
            let _ = (key.chars().count(), value.raw());
        }
        let _ = jwt.audiences().count();
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(token) = std::str::from_utf8(data) {
        check(token);
    }
    if let Some(nul) = data.iter().position(|&b| b == 0) {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (header, claims) = (&data[..nul], &data[nul + 1..]);
        check(&format!("{}.{}.{}", b64.encode(header), b64.encode(claims), b64.encode([7u8; 32])));
    }
    if let Ok(json::Value::Object(object)) = json::parse(data) {
        for (key, value) in object.iter() {
            assert!(object.get(&key.chars().collect::<String>()).is_some());
            let _ = value.raw();
        }
    }
});
