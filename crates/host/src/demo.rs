//! The bundled demo's token: what `edgegate serve` with no configuration hands out so that the
//! auth route can be tried at once.
//!
//! The demo's HS256 secret is the environment variable [`SECRET_ENV`], or [`DEFAULT_SECRET`]
//! when it is unset. The default is published, so a token signed with it proves nothing:
//! it is for trying the demo on your own machine, never for anything real.

pub(crate) mod origin;
pub mod tls;

use base64ct::{Base64UrlUnpadded, Encoding};

/// The environment variable the demo's HS256 secret comes from.
pub const SECRET_ENV: &str = "EDGEGATE_DEMO_SECRET";

/// The demo's secret when [`SECRET_ENV`] is unset. Published in the docs: not a secret.
pub const DEFAULT_SECRET: &str = "edgegate-demo-secret-not-for-production";

/// The demo's `kid`.
pub const KID: &str = "demo";

/// An HS256 token for `audience`, signed with `secret`, valid for `ttl_seconds` from `now`.
pub fn token(secret: &[u8], audience: &str, subject: &str, now: u64, ttl_seconds: u64) -> String {
    let header = format!(r#"{{"alg":"HS256","typ":"JWT","kid":"{KID}"}}"#);
    let claims = serde_json::json!({
        "iss": "edgegate-demo",
        "sub": subject,
        "aud": audience,
        "scope": "demo",
        "iat": now,
        "exp": now + ttl_seconds,
    });
    let input = format!(
        "{}.{}",
        Base64UrlUnpadded::encode_string(header.as_bytes()),
        Base64UrlUnpadded::encode_string(claims.to_string().as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let signature = ring::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", Base64UrlUnpadded::encode_string(signature.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_secret_is_long_enough_for_hs256() {
        assert!(DEFAULT_SECRET.len() >= 32);
    }

    #[test]
    fn tokens_verify_with_the_secret_and_only_with_it() {
        use edgegate_runtime::keys::{Alg, Key};
        let token =
            token(b"0123456789abcdef0123456789abcdef", "service-a", "ada", 1_700_000_000, 60);
        let (input, sig) = token.rsplit_once('.').unwrap();
        let sig = Base64UrlUnpadded::decode_vec(sig).unwrap();
        let key = Key::hmac(Alg::Hs256, b"0123456789abcdef0123456789abcdef", None).unwrap();
        assert!(key.verify(input.as_bytes(), &sig));
        let other = Key::hmac(Alg::Hs256, DEFAULT_SECRET.as_bytes(), None).unwrap();
        assert!(!other.verify(input.as_bytes(), &sig));
    }
}
