//! The admin token (`EDGEGATE_ADMIN_TOKEN`): a secret read from the environment, never from
//! the configuration file, which `POST /reload` and a split's override header require. A leaf:
//! the admin listener and the split router both check requests against it.

use std::sync::Arc;

use http::{Request, header};

use super::ConfigError;

/// The environment variable whose value `POST /reload` requires as a bearer token.
pub const TOKEN_ENV: &str = "EDGEGATE_ADMIN_TOKEN";

/// The admin token, if one is set.
#[derive(Clone, Default)]
pub(crate) struct Token(Option<Arc<str>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.write_str(if self.0.is_some() { "Token(set)" } else { "Token(none)" })
    }
}

impl Token {
    /// `EDGEGATE_ADMIN_TOKEN`, if set; refused when set and empty.
    pub(crate) fn from_env() -> Result<Self, ConfigError> {
        Self::from_value(std::env::var(TOKEN_ENV).ok())
    }

    fn from_value(value: Option<String>) -> Result<Self, ConfigError> {
        match value {
            Some(token) if token.is_empty() => Err(ConfigError::at(
                "environment",
                TOKEN_ENV,
                "is set but empty: set it to a secret, or unset it",
            )),
            Some(token) => match strong_enough(&token) {
                Ok(()) => Ok(Self(Some(token.into()))),
                Err(why) => Err(ConfigError::at("environment", TOKEN_ENV, why)),
            },
            None => Ok(Self(None)),
        }
    }

    /// The sha256 of the token, if one is set: tenants' tokens may not be it.
    pub(crate) fn hash(&self) -> Option<[u8; 32]> {
        self.0.as_deref().map(|token| sha256(token.as_bytes()))
    }

    /// Whether a token is set.
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `request` may use a guarded endpoint: no token is set, or it carries it.
    pub(crate) fn admits<B>(&self, request: &Request<B>) -> bool {
        if self.0.is_none() {
            return true;
        }
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        self.is(given.as_bytes())
    }

    /// The token `token`.
    #[cfg(test)]
    pub(crate) fn new(token: &str) -> Self {
        Self(Some(token.into()))
    }

    /// Whether a token is set and `given` is it.
    pub(crate) fn is(&self, given: &[u8]) -> bool {
        let Some(token) = &self.0 else { return false };
        // Compared in time that does not depend on where the first difference is.
        given.len() == token.len()
            && given.iter().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// The fewest characters a token may have: 32, as `openssl rand -hex 16` writes 128 bits.
pub(crate) const MIN_TOKEN: usize = 32;

/// Values that documentation, examples and manifests have shown as a token: refused however
/// long, since anyone who read them knows them (shorter ones fail the length check).
const PLACEHOLDERS: [&str; 1] = ["replace-with-a-long-random-token"];

/// Whether `token` can be a secret: not a known placeholder, and at least [`MIN_TOKEN`]
/// characters. `Err` says why not.
pub(crate) fn strong_enough(token: &str) -> Result<(), String> {
    let lower = token.to_ascii_lowercase();
    if PLACEHOLDERS.iter().any(|p| lower.trim() == *p) {
        return Err(format!(
            "is a placeholder from an example, not a secret: set a random one (openssl rand -hex {})",
            MIN_TOKEN / 2
        ));
    }
    if token.chars().count() < MIN_TOKEN {
        return Err(format!(
            "is {} characters, too short to be a secret: at least {MIN_TOKEN} (openssl rand -hex {})",
            token.chars().count(),
            MIN_TOKEN / 2
        ));
    }
    Ok(())
}

/// The sha256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_required_exactly_when_set() {
        let with = |auth: Option<&str>| {
            let mut request = Request::new(());
            if let Some(auth) = auth {
                request.headers_mut().insert(header::AUTHORIZATION, auth.parse().unwrap());
            }
            request
        };
        let open = Token::from_value(None).unwrap();
        assert!(open.admits(&with(None)));
        assert!(Token::from_value(Some(String::new())).is_err(), "an empty secret fails closed");
        let guarded = Token::new("s3cret");
        assert!(guarded.admits(&with(Some("Bearer s3cret"))));
        assert!(!guarded.admits(&with(None)));
        assert!(!guarded.admits(&with(Some("Bearer s3cre"))));
        assert!(!guarded.admits(&with(Some("Bearer s3cret2"))));
        assert!(!guarded.admits(&with(Some("s3cret"))));
    }

    #[test]
    fn a_placeholder_or_a_short_token_is_refused_at_start() {
        let refused = |value: &str| Token::from_value(Some(value.into())).unwrap_err().to_string();
        assert!(refused("replace-with-a-long-random-token").contains("placeholder"));
        assert!(refused("Replace-With-A-Long-Random-Token").contains("placeholder"));
        assert!(refused("short-token").contains("too short"));
        let random = "3f9c1d0e7a2b4c6d8e0f1a2b3c4d5e6f";
        assert!(Token::from_value(Some(random.into())).unwrap().is_set());
        assert_eq!(Token::new(random).hash(), Some(sha256(random.as_bytes())));
    }
}
