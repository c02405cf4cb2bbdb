//! Any bytes as a request buffer: parsing never panics, and a buffer that parses re-encodes
//! to exactly the same bytes.
#![no_main]

use edgegate_abi::request::{self, RequestParts, RequestView};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(view) = RequestView::parse(data) else { return };
    let headers: Vec<(&[u8], &[u8])> = view.headers().iter().collect();
    assert_eq!(headers.len(), view.headers().len());
    let _ = (view.path(), view.query(), view.header("host"));
    let parts = RequestParts {
        method: view.method(),
        target: view.target(),
        authority: view.authority(),
        headers: headers.as_slice(),
        body: view.body(),
        tls: view.is_tls(),
    };
    let mut again = vec![0; request::encoded_len(&parts).unwrap()];
    request::encode(&parts, &mut again).unwrap();
    // Only the flags' other bits may differ: they are reserved and not re-encoded.
    assert_eq!(again[..28], data[..28]);
    assert_eq!(again[32..], data[32..]);
});
