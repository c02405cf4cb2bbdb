//! The JWS signature algorithms the gateway verifies, as the guest names them to the host in
//! [`crate::imports::JWS_VERIFY`].
//!
//! The names are those of RFC 7518 (and RFC 8037 for `EdDSA`), matched exactly: `hs256` or
//! `none` is no algorithm at all. The codes are part of ABI v1 and never change.

/// `kid_len` for a token that names no key id.
pub const NO_KID: u32 = u32::MAX;

/// A key id longer than this is refused before any lookup (RFC 7515 sets no limit; real ids
/// are UUIDs, thumbprints or short names).
pub const MAX_KID_LEN: usize = 256;

/// The highest result of [`crate::imports::JWT_CLAIMS`] that means "the token is refused":
/// refusal number `n` (1 or more) is returned as `REFUSED - n`. The numbers are the guest
/// SDK's, stable like every code of ABI v1.
pub const REFUSED: i32 = -1000;

/// The refusal number a [`crate::imports::JWT_CLAIMS`] result carries, if it is a refusal.
pub const fn refused(result: i32) -> Option<u32> {
    if result < REFUSED { Some(REFUSED.abs_diff(result)) } else { None }
}

/// A JWS signature algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Alg {
    /// HMAC with SHA-256.
    Hs256 = 1,
    /// HMAC with SHA-384.
    Hs384 = 2,
    /// HMAC with SHA-512.
    Hs512 = 3,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256 = 4,
    /// RSASSA-PSS with SHA-256 and MGF1 with SHA-256.
    Ps256 = 5,
    /// ECDSA on P-256 with SHA-256, signature as `r || s` (64 bytes).
    Es256 = 6,
    /// Ed25519 (RFC 8037).
    EdDsa = 7,
}

impl Alg {
    /// Every algorithm, in code order.
    pub const ALL: [Alg; 7] =
        [Self::Hs256, Self::Hs384, Self::Hs512, Self::Rs256, Self::Ps256, Self::Es256, Self::EdDsa];

    /// The JOSE name, e.g. `RS256`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::Hs384 => "HS384",
            Self::Hs512 => "HS512",
            Self::Rs256 => "RS256",
            Self::Ps256 => "PS256",
            Self::Es256 => "ES256",
            Self::EdDsa => "EdDSA",
        }
    }

    /// The algorithm with exactly this JOSE name (case-sensitive, as RFC 7515 requires).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|alg| alg.name() == name)
    }

    /// The code passed to the host.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The algorithm with this code.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|alg| alg.code() == code)
    }

    /// Whether this is an HMAC algorithm (a shared secret, not a public key).
    pub const fn is_hmac(self) -> bool {
        matches!(self, Self::Hs256 | Self::Hs384 | Self::Hs512)
    }

    /// The signature length the algorithm always produces, if it is fixed (RSA signatures are
    /// as long as the key's modulus).
    pub const fn signature_len(self) -> Option<usize> {
        match self {
            Self::Hs256 => Some(32),
            Self::Hs384 => Some(48),
            Self::Hs512 | Self::Es256 | Self::EdDsa => Some(64),
            Self::Rs256 | Self::Ps256 => None,
        }
    }
}

impl core::fmt::Display for Alg {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for alg in Alg::ALL {
            assert_eq!(Alg::from_name(alg.name()), Some(alg));
            assert_eq!(Alg::from_code(alg.code()), Some(alg));
        }
        assert_eq!(Alg::from_code(0), None);
        for name in ["none", "None", "hs256", "HS256 ", "RS384", "ES512", "PS384", ""] {
            assert_eq!(Alg::from_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn only_results_below_refused_are_refusals() {
        assert_eq!(refused(REFUSED - 1), Some(1));
        assert_eq!(refused(REFUSED - 22), Some(22));
        assert_eq!(refused(REFUSED), None);
        assert_eq!(refused(crate::HostError::NotGranted.code()), None);
        assert_eq!(refused(17), None);
    }
}
