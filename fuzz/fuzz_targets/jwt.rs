//! Any bytes as a bearer token, through the whole guest-side check with a verifier that
//! accepts every signature (so the fuzzer reaches the claims), and again with the first bytes
//! used as a JSON document: nothing panics, and whatever passes can be read completely.
#![no_main]

use edgegate_sdk::jwt::{self, Alg, Error, Validation, Verifier, json};
use libfuzzer_sys::fuzz_target;

struct AcceptAll;

impl Verifier for AcceptAll {
    fn verify(&self, _: Alg, _: Option<&[u8]>, _: &[u8], _: &[u8]) -> Result<(), Error> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(token) = std::str::from_utf8(data) {
        let validation = Validation { required: Vec::new(), ..Validation::default() };
        if let Ok(jwt) = jwt::verify(token, &validation, &AcceptAll, 1_700_000_000) {
            for (key, value) in jwt.claims().iter() {
                let _ = (key.chars().count(), value.raw());
            }
            let _ = jwt.audiences().count();
        }
    }
    if let Ok(json::Value::Object(object)) = json::parse(data) {
        for (key, value) in object.iter() {
            assert!(object.get(&key.chars().collect::<String>()).is_some());
            let _ = value.raw();
        }
    }
});
