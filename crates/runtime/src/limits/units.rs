//! Sizes and durations as configuration writes them: `2MiB`, `64KiB`, `512B`, `1GB` or a plain
//! number of bytes; `2ms`, `1s 500ms`, `1m`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A number of bytes, written in configuration as an integer or a string with a unit.
///
/// Binary units are powers of 1024 (`KiB`, `MiB`, `GiB`), decimal units powers of 1000 (`KB`,
/// `MB`, `GB`); `B` is bytes. Whitespace between the number and the unit is allowed; fractions
/// are not, so every size is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

/// Why a size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size `{0}`: expected bytes as a whole number, optionally with a unit B, KiB, MiB, GiB, KB, MB or GB (e.g. \"2MiB\")"
)]
pub struct ParseSizeError(String);

impl FromStr for ByteSize {
    type Err = ParseSizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseSizeError(s.to_owned());
        let trimmed = s.trim();
        let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        let number: u64 = digits.parse().map_err(|_| err())?;
        let multiplier: u64 = match unit.trim_start() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            _ => return Err(err()),
        };
        number.checked_mul(multiplier).map(ByteSize).ok_or_else(err)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if n >= size && n.is_multiple_of(size) {
                return write!(f, "{}{unit}", n / size);
            }
        }
        write!(f, "{n}B")
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"2MiB\" or a number of bytes")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| E::custom("a size cannot be negative"))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// Reads a duration written like `"2ms"`, `"1s 500ms"` or `"1m"` (humantime's syntax), and
/// says what is wrong with one that is not.
pub fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text)
        .map_err(|e| de::Error::custom(format!("invalid duration `{text}`: {e}")))
}

/// Reads a [`ByteSize`] as its number of bytes.
pub fn bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    ByteSize::deserialize(deserializer).map(ByteSize::bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        for (text, bytes) in [
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("2MiB", 2 << 20),
            ("64 KiB", 64 << 10),
            ("1GiB", 1 << 30),
            ("1KB", 1000),
            ("3MB", 3_000_000),
            (" 7GB ", 7_000_000_000),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }

    #[test]
    fn rejects_the_ambiguous_and_the_wrong() {
        for text in ["", "MiB", "1.5MiB", "-1", "2 mib", "2MiBs", "1 2", "99999999999999999999GiB"]
        {
            assert!(text.parse::<ByteSize>().is_err(), "{text}");
        }
    }

    #[test]
    fn deserializes_integers_and_strings() {
        #[derive(serde::Deserialize)]
        struct S {
            a: ByteSize,
            b: ByteSize,
        }
        let s: S = toml::from_str("a = 1024\nb = \"1MiB\"").unwrap();
        assert_eq!((s.a, s.b), (ByteSize(1024), ByteSize(1 << 20)));
        assert!(toml::from_str::<S>("a = -1\nb = 1").is_err());
    }

    proptest! {
        #[test]
        fn display_round_trips(n in 0u64..(1 << 50)) {
            let size = ByteSize(n);
            prop_assert_eq!(size.to_string().parse::<ByteSize>(), Ok(size));
        }
    }
}
