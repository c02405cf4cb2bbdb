//! JWT validation at the edge: compact JWS (RFC 7515) with the claims of RFC 7519.
//!
//! The token is taken apart in the guest, without copying more than the decoded header and
//! payload into the arena; the signature is checked by a [`Verifier`]. The default one,
//! [`HostKeys`], asks the gateway (`jws_verify`): the keys stay in the host and never enter
//! guest memory, and RSA and ECDSA run at native speed. With the `guest-*` features,
//! `guest::GuestKeys` verifies inside the guest instead, for running outside edgegate.
//!
//! ```text
//!  "Bearer h.p.s" ─▶ size cap ─▶ split in 3 ─▶ b64url(h) ─▶ header JSON ─▶ alg / crit / kid /
//!        │            (before any decoding)     canonical    no duplicate   embedded keys
//!        ▼                                                   keys
//!  Verifier::verify(alg, kid, "h.p", sig) ─▶ b64url(p) ─▶ claims JSON ─▶ exp nbf iat iss aud
//!  (host: ring, by kid; the key decides the alg)                          required claims
//! ```
//!
//! Every failure is an [`Error`] with a short stable code; [`Error::response`] turns it into
//! the answer an API gateway gives: 401 with `WWW-Authenticate: Bearer error="invalid_token"`
//! and `{"error":"<code>"}`, nothing more. What exactly was wrong is the worker's to log.
//!
//! ```
//! use edgegate_sdk::jwt::{self, Validation};
//! use edgegate_sdk::{Request, Response, host};
//!
//! fn handle(req: &Request) -> Response {
//!     let validation = Validation::from_config();
//!     let token = match jwt::bearer_token(req).and_then(|t| {
//!         jwt::verify(t, &validation, &jwt::HostKeys, host::unix_time())
//!     }) {
//!         Ok(token) => token,
//!         Err(e) => return e.response(),
//!     };
//!     let sub = token.claims().get("sub").and_then(|v| v.as_json_str());
//!     Response::text(200, sub.and_then(|s| s.as_str()).unwrap_or("anonymous"))
//! }
//! ```

mod b64;
#[cfg(any(
    feature = "guest-hmac",
    feature = "guest-rsa",
    feature = "guest-ecdsa",
    feature = "guest-ed25519"
))]
pub mod guest;
mod in_host;

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use crate::json::{self, JsonError, JsonStr, Object, Value};
use edgegate_abi::HostError;
pub use edgegate_abi::jws::{Alg, MAX_KID_LEN};
pub use in_host::verify_in_host;

use crate::{ErrorCode, Request, Response};

/// The default cap on a token's length, checked before anything is decoded.
pub const DEFAULT_MAX_TOKEN_LEN: usize = 8 << 10;

/// The default clock skew allowed for `exp`, `nbf` and `iat`, in seconds.
pub const DEFAULT_LEEWAY: i64 = 60;

/// Why a token was refused.
///
/// All but [`Error::KeysUnavailable`] and [`Error::NotConfigured`] are the client's: 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// No `Authorization: Bearer …` header.
    MissingToken,
    /// The token is longer than the cap; nothing of it was decoded.
    TokenTooLarge,
    /// Not a compact JWS: not three parts, a header or claims that are not a JSON object, a
    /// header parameter of the wrong type, more than one `Authorization` header.
    Malformed,
    /// A part is not canonical unpadded base64url (RFC 7515 §2): padding, other characters,
    /// or unused bits that are not zero.
    BadBase64,
    /// The header or the claims name a key twice.
    DuplicateKey,
    /// `alg` is `none`, in any letter case: an unsigned token.
    AlgNone,
    /// `alg` is not one this gateway verifies (names are case-sensitive).
    AlgUnsupported,
    /// The key the token names is for another algorithm than its `alg`.
    AlgMismatch,
    /// The header has `crit`: no extension is understood, so none may be critical.
    CritUnsupported,
    /// The header carries or points at a key (`jwk`, `jku`, `x5u`, `x5c`). Keys come from the
    /// gateway's configuration only; these are never used, never fetched.
    EmbeddedKey,
    /// No configured key has the token's `kid` (compared exactly, at most [`MAX_KID_LEN`]
    /// bytes), or the token names none and there is not exactly one key.
    UnknownKid,
    /// The signature does not verify (wrong length, r or s out of range, or simply wrong).
    BadSignature,
    /// `exp` is past, beyond the leeway.
    Expired,
    /// `nbf` is in the future, beyond the leeway.
    NotYetValid,
    /// `iat` is in the future, beyond the leeway.
    IssuedInFuture,
    /// `iss` is missing or not the configured issuer.
    BadIssuer,
    /// `aud` is missing or names none of the configured audiences.
    BadAudience,
    /// A required claim is missing.
    MissingClaim,
    /// A registered claim has the wrong JSON type: `exp`, `nbf`, `iat` must be numbers, `iss`
    /// a string, `aud` a string or an array of strings.
    BadClaimType,
    /// The keys cannot be consulted now (a JWKS URL not fetched yet, or stale): 503.
    KeysUnavailable,
    /// The worker has no keys configured at all: 500, the operator's mistake.
    NotConfigured,
}

impl Error {
    /// Every refusal, in the order of its number in the ABI ([`Error::number`]). New ones are
    /// added at the end; none moves.
    pub const ALL: [Self; 21] = [
        Self::MissingToken,
        Self::TokenTooLarge,
        Self::Malformed,
        Self::BadBase64,
        Self::DuplicateKey,
        Self::AlgNone,
        Self::AlgUnsupported,
        Self::AlgMismatch,
        Self::CritUnsupported,
        Self::EmbeddedKey,
        Self::UnknownKid,
        Self::BadSignature,
        Self::Expired,
        Self::NotYetValid,
        Self::IssuedInFuture,
        Self::BadIssuer,
        Self::BadAudience,
        Self::MissingClaim,
        Self::BadClaimType,
        Self::KeysUnavailable,
        Self::NotConfigured,
    ];

    /// The refusal's number when the host verifies the token (`jwt_claims` returns
    /// `edgegate_abi::jws::REFUSED - number`): its place in [`Error::ALL`], from 1.
    pub fn number(self) -> u32 {
        Self::ALL.iter().position(|e| *e == self).map_or(0, |i| i as u32 + 1)
    }

    /// The refusal numbered `number`, if there is one.
    pub fn from_number(number: u32) -> Option<Self> {
        Self::ALL.get(number.checked_sub(1)? as usize).copied()
    }

    /// The short stable code sent to the client and used in logs.
    pub const fn code(self) -> &'static str {
        match self {
            Self::MissingToken => "missing_token",
            Self::TokenTooLarge => "token_too_large",
            Self::Malformed => "malformed_token",
            Self::BadBase64 => "bad_base64",
            Self::DuplicateKey => "duplicate_key",
            Self::AlgNone => "alg_none",
            Self::AlgUnsupported => "alg_unsupported",
            Self::AlgMismatch => "alg_mismatch",
            Self::CritUnsupported => "crit_unsupported",
            Self::EmbeddedKey => "embedded_key",
            Self::UnknownKid => "unknown_kid",
            Self::BadSignature => "bad_signature",
            Self::Expired => "token_expired",
            Self::NotYetValid => "token_not_yet_valid",
            Self::IssuedInFuture => "iat_in_future",
            Self::BadIssuer => "bad_issuer",
            Self::BadAudience => "bad_audience",
            Self::MissingClaim => "missing_claim",
            Self::BadClaimType => "bad_claim_type",
            Self::KeysUnavailable => "keys_unavailable",
            Self::NotConfigured => "jwt_not_configured",
        }
    }

    /// What the client gets.
    ///
    /// * a missing token: 401, `WWW-Authenticate: Bearer` (RFC 6750 §3.1: no error code when
    ///   no credentials were sent);
    /// * any other refusal: 401, `WWW-Authenticate: Bearer error="invalid_token"`;
    /// * keys unavailable: the gateway's 503 `worker_unavailable`; not configured: its 500.
    ///
    /// The body is `{"error":"<code>"}`.
    pub fn response(self) -> Response {
        let challenge = match self {
            Self::KeysUnavailable => {
                return Response::error(ErrorCode::Unavailable, "jwt keys unavailable");
            }
            Self::NotConfigured => {
                return Response::error(ErrorCode::Internal, "no jwt keys configured");
            }
            Self::MissingToken => "Bearer",
            _ => "Bearer error=\"invalid_token\"",
        };
        Response::builder(401)
            .header("www-authenticate", challenge)
            .header("content-type", "application/json")
            .header("cache-control", "no-store")
            .body(crate::response::error_body(self.code()))
    }
}

impl From<JsonError> for Error {
    fn from(e: JsonError) -> Self {
        match e {
            JsonError::DuplicateKey => Self::DuplicateKey,
            JsonError::Syntax | JsonError::TooDeep => Self::Malformed,
        }
    }
}

/// Checks a signature. [`HostKeys`] asks the gateway; tests and the portable path bring their
/// own.
pub trait Verifier {
    /// Whether `signature` is a valid `alg` signature of `signing_input` by the key named
    /// `kid` (or the only key, when the token names none). The key decides the algorithm:
    /// a key for another `alg` is [`Error::AlgMismatch`], never a verification with the
    /// token's choice.
    fn verify(
        &self,
        alg: Alg,
        kid: Option<&[u8]>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<(), Error>;
}

/// The gateway's key set for this worker (`[workers.NAME.jwt]`), through the `jws_verify`
/// host call: the keys never enter guest memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostKeys;

impl Verifier for HostKeys {
    fn verify(
        &self,
        alg: Alg,
        kid: Option<&[u8]>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<(), Error> {
        match crate::sys::verify_jws(alg.code(), kid, signing_input, signature) {
            0 => Ok(()),
            code => Err(match HostError::from_code(code) {
                Some(HostError::NotFound | HostError::LimitExceeded) => Error::UnknownKid,
                Some(HostError::AlgorithmMismatch) => Error::AlgMismatch,
                Some(HostError::BadSignature) => Error::BadSignature,
                Some(error) => host_refusal(error),
                None => Error::Malformed,
            }),
        }
    }
}

/// What a host call's error means for the token: the worker has no keys (the operator's
/// mistake), they cannot be read now, or the call itself was wrong.
fn host_refusal(error: HostError) -> Error {
    match error {
        HostError::NotGranted => Error::NotConfigured,
        HostError::Unavailable | HostError::Timeout => Error::KeysUnavailable,
        _ => Error::Malformed,
    }
}

/// What a token must satisfy besides its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// `iss` must be exactly this, when set.
    pub issuer: Option<String>,
    /// `aud` (a string or an array) must name at least one of these, when any are set.
    pub audiences: Vec<String>,
    /// Allowed clock skew for `exp`, `nbf` and `iat`, in seconds.
    pub leeway: i64,
    /// Claims that must be present.
    pub required: Vec<String>,
    /// Tokens longer than this are refused before any decoding.
    pub max_token_len: usize,
}

impl Default for Validation {
    /// No issuer or audience check, 60 s of leeway, `exp` required, 8 KiB at most.
    fn default() -> Self {
        Self {
            issuer: None,
            audiences: Vec::new(),
            leeway: DEFAULT_LEEWAY,
            required: alloc::vec![String::from("exp")],
            max_token_len: DEFAULT_MAX_TOKEN_LEN,
        }
    }
}

/// The configuration keys [`Validation::from_config`] reads; the gateway fills them from the
/// worker's `[workers.NAME.jwt]` table.
pub mod config_keys {
    /// The issuer.
    pub const ISSUER: &str = "jwt.issuer";
    /// Audiences, comma-separated.
    pub const AUDIENCES: &str = "jwt.audiences";
    /// Leeway in whole seconds.
    pub const LEEWAY: &str = "jwt.leeway";
    /// Required claims, comma-separated (empty: none).
    pub const REQUIRED: &str = "jwt.required";
    /// The token length cap in bytes.
    pub const MAX_TOKEN: &str = "jwt.max_token";
}

fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

impl Validation {
    /// The policy the gateway configured for this worker, defaults where it set nothing.
    pub fn from_config() -> Self {
        Self::from_table(&crate::host::Config::load())
    }

    /// The policy in a configuration table already read (one pass over it).
    pub fn from_table(config: &crate::host::Config) -> Self {
        Self::from_pairs(config.iter())
    }

    /// The policy in a worker's configuration as `(key, value)` pairs: for a host that holds
    /// the table itself.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut v = Self::default();
        for (key, value) in pairs {
            match key {
                config_keys::ISSUER => v.issuer = Some(value.into()),
                config_keys::AUDIENCES => v.audiences = list(value),
                config_keys::LEEWAY => v.leeway = value.parse().unwrap_or(v.leeway),
                config_keys::REQUIRED => v.required = list(value),
                config_keys::MAX_TOKEN => {
                    v.max_token_len = value.parse().unwrap_or(v.max_token_len)
                }
                _ => {}
            }
        }
        v
    }
}

/// The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1; the scheme is
/// case-insensitive). More than one `Authorization` header is [`Error::Malformed`].
pub fn bearer_token<'a>(req: &Request<'a>) -> Result<&'a str, Error> {
    bearer_of(
        req.headers()
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(b"authorization"))
            .map(|(_, value)| value),
    )
}

/// The token of the `Authorization` header whose values are `values`, by the rules of
/// [`bearer_token`]: for a host that holds the headers itself (a gateway routing on claims).
pub fn bearer_of<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Result<&'a str, Error> {
    let value = values.next().ok_or(Error::MissingToken)?;
    if values.next().is_some() {
        return Err(Error::Malformed);
    }
    let value = core::str::from_utf8(value).map_err(|_| Error::Malformed)?;
    let (scheme, token) = value.split_once(' ').ok_or(Error::MissingToken)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Error::MissingToken);
    }
    let token = token.trim_matches(' ');
    if token.is_empty() {
        return Err(Error::MissingToken);
    }
    Ok(token)
}

/// A compact JWS whose signature verified. Its header and payload are decoded in the arena.
#[derive(Debug, Clone)]
pub struct Jws {
    alg: Alg,
    header: String,
    /// Where the header's object is in `header` (it may be surrounded by white space).
    header_object: Range<usize>,
    payload: Vec<u8>,
}

impl Jws {
    /// The algorithm it was signed with.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The JOSE header (validated: an object without duplicate keys).
    pub fn header(&self) -> Object<'_> {
        Object::validated(self.header.get(self.header_object.clone()).unwrap_or("{}"))
    }

    /// The payload, as signed.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
}

/// A JWT whose signature and claims were checked.
#[derive(Debug, Clone)]
pub struct Jwt {
    alg: Alg,
    claims: String,
    claims_object: Range<usize>,
}

impl Jwt {
    /// The algorithm it was signed with.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The claims set (validated: an object without duplicate keys).
    pub fn claims(&self) -> Object<'_> {
        Object::validated(self.claims.get(self.claims_object.clone()).unwrap_or("{}"))
    }

    /// The audiences of `aud`, whether it is a string or an array.
    pub fn audiences(&self) -> impl Iterator<Item = JsonStr<'_>> {
        self.claim_strings("aud")
    }

    /// The strings of claim `name`: one if it is a string, each string element if it is an
    /// array, none otherwise.
    pub fn claim_strings(&self, name: &str) -> impl Iterator<Item = JsonStr<'_>> {
        string_or_strings(self.claims().get(name))
    }
}

/// Where `object` is in `text`.
fn range_of(text: &str, object: Object<'_>) -> Range<usize> {
    let start = object.raw().as_ptr() as usize - text.as_ptr() as usize;
    start..start + object.raw().len()
}

/// The strings of a claim that is a string or an array (others are skipped).
fn string_or_strings<'a>(value: Option<Value<'a>>) -> impl Iterator<Item = JsonStr<'a>> + 'a {
    value.into_iter().flat_map(Value::strings)
}

/// Checks a compact JWS: its shape, its header, and its signature through `keys`.
///
/// Nothing is decoded before the length is checked against `max_len`; the payload is not
/// decoded before the signature verifies.
pub fn verify_jws<V: Verifier + ?Sized>(
    token: &str,
    max_len: usize,
    keys: &V,
) -> Result<Jws, Error> {
    if token.len() > max_len {
        return Err(Error::TokenTooLarge);
    }
    let mut parts = token.splitn(4, '.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Malformed);
    };
    let header = String::from_utf8(b64::decode(header_b64)?).map_err(|_| Error::Malformed)?;
    let mut fields = HeaderFields::default();
    let header_object =
        range_of(&header, json::parse_object(&header, &mut |k, v| fields.visit(k, v))?);
    let checked = fields.check()?;
    let signature = b64::decode(signature_b64)?;
    if checked.alg.signature_len().is_some_and(|len| len != signature.len()) {
        return Err(Error::BadSignature);
    }
    let signing_input = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
    let kid = checked.kid.as_deref();
    keys.verify(checked.alg, kid, signing_input, &signature)?;
    let payload = b64::decode(payload_b64)?;
    Ok(Jws { alg: checked.alg, header, header_object, payload })
}

/// Checks a JWT: [`verify_jws`], then its claims against `validation` at `now` (seconds
/// since the epoch).
pub fn verify<V: Verifier + ?Sized>(
    token: &str,
    validation: &Validation,
    keys: &V,
    now: i64,
) -> Result<Jwt, Error> {
    verify_each(token, validation, keys, now, &mut |_, _| {})
}

/// [`verify`], showing `each` every claim as the claims are parsed, before they are checked:
/// for a caller that reads them as they pass, rather than looking each up afterwards. What
/// `each` saw means nothing unless this returns `Ok`.
pub fn verify_each<V: Verifier + ?Sized>(
    token: &str,
    validation: &Validation,
    keys: &V,
    now: i64,
    each: &mut dyn FnMut(JsonStr<'_>, Value<'_>),
) -> Result<Jwt, Error> {
    let jws = verify_jws(token, validation.max_token_len, keys)?;
    let claims = String::from_utf8(jws.payload).map_err(|_| Error::Malformed)?;
    let mut registered = Registered::default();
    let object = json::parse_object(&claims, &mut |k, v| {
        registered.visit(k, v);
        each(k, v);
        Ok::<(), Error>(())
    })?;
    check_claims(object, &registered, validation, now)?;
    let claims_object = range_of(&claims, object);
    Ok(Jwt { alg: jws.alg, claims, claims_object })
}

struct CheckedHeader {
    alg: Alg,
    kid: Option<Vec<u8>>,
}

/// A member name, decoded, when it is short enough to be one of the registered names this
/// module looks for (all are at most 4 bytes; 8 leaves room). One pass over an object then
/// finds them all.
struct ShortKey {
    bytes: [u8; 8],
    len: usize,
}

impl ShortKey {
    fn of(key: JsonStr<'_>) -> Option<Self> {
        let mut bytes = [0u8; 8];
        if let Some(plain) = key.as_str() {
            bytes.get_mut(..plain.len())?.copy_from_slice(plain.as_bytes());
            return Some(Self { bytes, len: plain.len() });
        }
        let mut len = 0;
        for c in key.chars() {
            let mut utf8 = [0u8; 4];
            let encoded = c.encode_utf8(&mut utf8).as_bytes();
            bytes.get_mut(len..len + encoded.len())?.copy_from_slice(encoded);
            len += encoded.len();
        }
        Some(Self { bytes, len })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The header members that matter, collected while the header is parsed.
#[derive(Default)]
struct HeaderFields<'a> {
    alg: Option<Value<'a>>,
    kid: Option<Value<'a>>,
}

impl<'a> HeaderFields<'a> {
    fn visit(&mut self, key: JsonStr<'a>, value: Value<'a>) -> Result<(), Error> {
        let Some(name) = ShortKey::of(key) else { return Ok(()) };
        match name.as_bytes() {
            b"crit" => return Err(Error::CritUnsupported),
            b"jwk" | b"jku" | b"x5u" | b"x5c" => return Err(Error::EmbeddedKey),
            b"alg" => self.alg = Some(value),
            b"kid" => self.kid = Some(value),
            _ => {}
        }
        Ok(())
    }

    fn check(self) -> Result<CheckedHeader, Error> {
        let alg = self.alg.ok_or(Error::Malformed)?.as_json_str().ok_or(Error::Malformed)?;
        if alg.chars().map(|c| c.to_ascii_lowercase()).eq("none".chars()) {
            return Err(Error::AlgNone);
        }
        let mut name = Vec::with_capacity(8);
        if !alg.decode_into(&mut name, 8) {
            return Err(Error::AlgUnsupported);
        }
        let alg = core::str::from_utf8(&name)
            .ok()
            .and_then(Alg::from_name)
            .ok_or(Error::AlgUnsupported)?;
        let kid = match self.kid {
            None => None,
            Some(Value::String(kid)) => {
                let mut bytes = Vec::with_capacity(kid.raw().len().min(MAX_KID_LEN));
                if !kid.decode_into(&mut bytes, MAX_KID_LEN) {
                    return Err(Error::UnknownKid);
                }
                Some(bytes)
            }
            Some(_) => return Err(Error::Malformed),
        };
        Ok(CheckedHeader { alg, kid })
    }
}

/// A NumericDate claim: absent, or a JSON number (a string is [`Error::BadClaimType`]).
fn numeric_date(value: Option<Value<'_>>) -> Result<Option<i64>, Error> {
    match value {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.as_seconds())),
        Some(_) => Err(Error::BadClaimType),
    }
}

/// The registered claims of a claims set, found in one pass.
#[derive(Default)]
struct Registered<'a> {
    exp: Option<Value<'a>>,
    nbf: Option<Value<'a>>,
    iat: Option<Value<'a>>,
    iss: Option<Value<'a>>,
    aud: Option<Value<'a>>,
}

impl<'a> Registered<'a> {
    /// Takes note of one member of the claims set.
    fn visit(&mut self, key: JsonStr<'a>, value: Value<'a>) {
        let Some(name) = ShortKey::of(key) else { return };
        let slot = match name.as_bytes() {
            b"exp" => &mut self.exp,
            b"nbf" => &mut self.nbf,
            b"iat" => &mut self.iat,
            b"iss" => &mut self.iss,
            b"aud" => &mut self.aud,
            _ => return,
        };
        *slot = Some(value);
    }

    /// Whether claim `name` is present, looking past the registered ones only when needed.
    fn has(&self, claims: Object<'_>, name: &str) -> bool {
        match name {
            "exp" => self.exp.is_some(),
            "nbf" => self.nbf.is_some(),
            "iat" => self.iat.is_some(),
            "iss" => self.iss.is_some(),
            "aud" => self.aud.is_some(),
            other => claims.get(other).is_some(),
        }
    }
}

fn check_claims(
    claims: Object<'_>,
    registered: &Registered<'_>,
    v: &Validation,
    now: i64,
) -> Result<(), Error> {
    let exp = numeric_date(registered.exp)?;
    let nbf = numeric_date(registered.nbf)?;
    let iat = numeric_date(registered.iat)?;
    let iss = match registered.iss {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(Error::BadClaimType),
    };
    let aud = registered.aud;
    match aud {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.iter().all(|item| matches!(item, Value::String(_))) => {}
        Some(_) => return Err(Error::BadClaimType),
    }
    if !v.required.iter().all(|name| registered.has(claims, name)) {
        return Err(Error::MissingClaim);
    }
    let leeway = v.leeway.max(0);
    if exp.is_some_and(|exp| now >= exp.saturating_add(leeway)) {
        return Err(Error::Expired);
    }
    if nbf.is_some_and(|nbf| now.saturating_add(leeway) < nbf) {
        return Err(Error::NotYetValid);
    }
    if iat.is_some_and(|iat| iat > now.saturating_add(leeway)) {
        return Err(Error::IssuedInFuture);
    }
    if let Some(issuer) = &v.issuer
        && !iss.is_some_and(|iss| iss.eq_str(issuer))
    {
        return Err(Error::BadIssuer);
    }
    if !v.audiences.is_empty()
        && !string_or_strings(aud).any(|a| v.audiences.iter().any(|want| a.eq_str(want)))
    {
        return Err(Error::BadAudience);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
