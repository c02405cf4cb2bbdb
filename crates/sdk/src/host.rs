//! The host functions a worker can call: log, clocks, random bytes and configuration.
//! (Signature checks are in [`crate::jwt`].)
//!
//! Each call counts against the worker's host-call budget (default 1000 per request).

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use edgegate_abi::{HostError, LogLevel};

/// Writes `message` to the gateway's log, tagged with the worker and request id. Messages over
/// 1 KiB are cut.
pub fn log(level: LogLevel, message: &str) {
    crate::sys::log(level as i32, message.as_bytes());
}

/// Formats and logs a message without allocating; output past 512 bytes is cut.
///
/// ```
/// edgegate_sdk::host::log_fmt(edgegate_sdk::LogLevel::Info, format_args!("{} items", 3));
/// ```
pub fn log_fmt(level: LogLevel, args: fmt::Arguments<'_>) {
    let mut line = LineBuffer::<512>::new();
    let _ = fmt::write(&mut line, args);
    log(level, line.as_str());
}

/// Nanoseconds on the gateway's monotonic clock. Only differences mean anything.
pub fn monotonic_now() -> u64 {
    crate::sys::monotonic_now()
}

/// Seconds since the Unix epoch, from the gateway's real-time clock: what token lifetimes
/// (`exp`, `nbf`, `iat`) are compared with.
pub fn unix_time() -> i64 {
    crate::sys::wall_now().div_euclid(1_000_000_000)
}

/// Fills `buf` with cryptographically secure random bytes from the host (at most 64 KiB per
/// call).
pub fn random_fill(buf: &mut [u8]) -> Result<(), HostError> {
    status(crate::sys::fill_random(buf)).map(drop)
}

/// A host function's `i32` result: the non-negative value, or the negative code as a
/// [`HostError`] (an unknown one reads as `InvalidArgument`).
pub(crate) fn status(result: i32) -> Result<u32, HostError> {
    u32::try_from(result)
        .map_err(|_| HostError::from_code(result).unwrap_or(HostError::InvalidArgument))
}

/// Calls a host function that answers into a buffer: with `first` bytes of room, then, if the
/// answer (whose length the host returns) is longer, once more with room for all of it.
pub(crate) fn read_answer(
    first: usize,
    mut call: impl FnMut(&mut [u8]) -> i32,
) -> Result<Vec<u8>, HostError> {
    let mut buf = vec![0u8; first];
    for _ in 0..2 {
        let len = status(call(&mut buf))? as usize;
        if len <= buf.len() {
            buf.truncate(len);
            // The arena takes the unused tail back (the buffer is its most recent block).
            buf.shrink_to_fit();
            return Ok(buf);
        }
        buf.resize(len, 0);
    }
    // The host kept the answer for the second call; a third size means a broken host.
    Err(HostError::InvalidArgument)
}

/// The value of `key` in this worker's `config` table, or `None` if it is not configured.
pub fn config(key: &str) -> Option<String> {
    let value = read_answer(64, |buf| crate::sys::config(key.as_bytes(), buf)).ok()?;
    // The host only stores UTF-8 values.
    String::from_utf8(value).ok()
}

/// The worker's whole `config` table, fetched in one host call: for a worker that reads
/// several values, cheaper than [`config`] for each.
///
/// ```
/// let config = edgegate_sdk::host::Config::load();
/// let greeting = config.get("greeting").unwrap_or("hello");
/// # assert_eq!(greeting, "hello");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Config {
    block: alloc::vec::Vec<u8>,
}

impl Config {
    /// Reads the table from the host (natively: empty).
    pub fn load() -> Self {
        match read_answer(512, crate::sys::config_table) {
            // A block the host wrote is well-formed; anything else reads as empty.
            Ok(block) if edgegate_abi::HeaderBlock::parse_entries(&block).is_ok() => Self { block },
            _ => Self::default(),
        }
    }

    /// A table from explicit pairs (for tests).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let block = edgegate_abi::encode_entries(
            pairs.into_iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
        );
        Self { block }
    }

    /// Every `(key, value)`, in key order (values that are not UTF-8 are skipped).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let entries = edgegate_abi::HeaderBlock::parse_entries(&self.block).ok();
        entries.into_iter().flat_map(|block| block.iter()).filter_map(|(k, v)| {
            Some((core::str::from_utf8(k).ok()?, core::str::from_utf8(v).ok()?))
        })
    }

    /// The value of `key`, if configured.
    pub fn get(&self, key: &str) -> Option<&str> {
        let entries = edgegate_abi::HeaderBlock::parse_entries(&self.block).ok()?;
        let value = entries.iter().find(|(k, _)| *k == key.as_bytes())?.1;
        core::str::from_utf8(value).ok()
    }
}

/// A fixed-size text buffer for formatting without allocating; writes past `N` bytes are
/// dropped at a character boundary.
#[derive(Debug)]
pub struct LineBuffer<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> LineBuffer<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self { buf: [0; N], len: 0 }
    }

    /// What has been written so far.
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 characters are ever copied in (see `write_str`).
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> Default for LineBuffer<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for LineBuffer<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn line_buffer_cuts_at_char_boundaries() {
        let mut b = LineBuffer::<2>::new();
        write!(b, "aé").unwrap();
        assert_eq!(b.as_str(), "a", "half of a 2-byte character is not written");
        let mut b = LineBuffer::<3>::new();
        write!(b, "aé").unwrap();
        write!(b, "x").unwrap();
        assert_eq!(b.as_str(), "aé", "a full buffer takes nothing more");
    }

    #[test]
    fn natively_hostcalls_are_inert() {
        assert_eq!(config("anything"), None);
        assert_eq!(Config::load().get("anything"), None);
        let table = Config::from_pairs([("a", "1"), ("b", "two")]);
        assert_eq!(
            (table.get("a"), table.get("b"), table.get("c")),
            (Some("1"), Some("two"), None)
        );
        assert_eq!(random_fill(&mut [0; 4]), Err(HostError::Unavailable));
        let a = monotonic_now();
        assert!(monotonic_now() >= a);
        assert!(unix_time() > 1_700_000_000, "a real-time clock natively");
    }
}
