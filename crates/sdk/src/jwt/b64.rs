//! Canonical unpadded base64url (RFC 7515 §2, RFC 4648 §5), the only encoding a compact JWS
//! may use: no padding, no other alphabet, no white space, and the unused low bits of the last
//! character zero, so that every byte string has exactly one encoding (`base64ct` checks that
//! by re-encoding the last block).

use alloc::vec;
use alloc::vec::Vec;
use base64ct::{Base64UrlUnpadded, Encoding};

use super::Error;

/// Decodes one part of a token into a fresh arena buffer.
pub(super) fn decode(text: &str) -> Result<Vec<u8>, Error> {
    let mut out = vec![0u8; text.len() / 4 * 3 + 2];
    let len = Base64UrlUnpadded::decode(text, &mut out).map_err(|_| Error::BadBase64)?.len();
    out.truncate(len);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_canonical_text_only() {
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("Zg").unwrap(), b"f");
        assert_eq!(decode("Zm8").unwrap(), b"fo");
        assert_eq!(decode("Zm9v").unwrap(), b"foo");
        assert_eq!(decode("-_8").unwrap(), [0xfb, 0xff]);
        for bad in [
            "Zg==",  // padded
            "Zm8=",  // padded
            "Zh",    // "f" with a non-zero unused bit: not the canonical encoding
            "Zm9",   // "fo" likewise
            "Z",     // a length no encoding has
            "Zm9v+", // the standard alphabet's '+'
            "Zm/v",  // … and '/'
            "Zm 9v", // white space
            "Zm9v\n",
        ] {
            assert_eq!(decode(bad), Err(Error::BadBase64), "{bad:?}");
        }
    }
}
