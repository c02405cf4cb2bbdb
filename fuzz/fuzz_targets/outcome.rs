//! Any bytes as an outcome buffer, as a hostile guest could return: parsing never panics,
//! and whatever parses can be walked completely.
#![no_main]

use edgegate_abi::outcome::Outcome;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match Outcome::parse(data) {
        Ok(Outcome::Response { headers, body, .. }) => {
            assert_eq!(headers.iter().count(), headers.len());
            assert!(body.len() <= data.len());
        }
        Ok(Outcome::Forward { edits, .. }) => assert_eq!(edits.iter().count(), edits.len()),
        Ok(Outcome::Error { .. }) | Err(_) => {}
    }
});
