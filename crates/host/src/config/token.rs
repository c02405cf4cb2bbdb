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
            token => Ok(Self(token.map(Into::into))),
        }
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
}
