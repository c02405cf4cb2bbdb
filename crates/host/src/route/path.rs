//! Request path normalization: the path a route matches, a worker sees and an upstream gets
//! is one and the same, with no way to name one path to the router and another to the
//! upstream.
//!
//! Without it, a route `prefix = "/public"` to an unauthenticated worker would take
//! `/public/../admin` and `/public/%2e%2e/admin` and forward them unchanged; an upstream that
//! resolves dot-segments then serves `/admin`, which another route guards.
//!
//! With `normalize_path` on (the default), in this order:
//!
//! ```text
//!  /a/%7Eb/%2e%2E//c/./../%2fd
//!   │ 1. escapes: unreserved ones decoded (%7E → ~, %2E → .), others upper-cased;
//!   │    %2F and %5C (an escaped / or \): refused, or kept as data (`escaped_slashes`)
//!   │ 2. empty segments dropped (`merge_slashes`)
//!   │ 3. dot-segments removed (RFC 3986 §5.2.4); a `..` above the root is refused
//!   ▼
//!  /a/~b/%2Fd                      (with escaped_slashes = "keep")
//! ```
//!
//! Escaped dots are decoded rather than kept as data: `%2E` is an unreserved character, which
//! RFC 3986 §6.2.2.2 says is the same as `.`, and upstreams decode it; kept, `%2e%2e` would
//! pass this gateway as a name and reach the upstream as `..`. An escaped slash is different:
//! it is reserved, so `a%2Fb` is one segment by the RFC, but many servers decode it into a
//! separator, so by default it is refused.
//!
//! Hot path: a path with no `%`, no `/.` and no `//` is checked in one scan and not copied.

/// How paths are normalized: the `[server]` keys `normalize_path`, `merge_slashes` and
/// `escaped_slashes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRules {
    /// Decode unreserved escapes and remove dot-segments. Off, paths are routed and forwarded
    /// exactly as received.
    pub normalize: bool,
    /// Drop empty segments: `/a//b` is `/a/b`.
    pub merge_slashes: bool,
    /// What an escaped `/` or `\` (`%2F`, `%5C`) gets.
    pub escaped_slashes: EscapedSlashes,
}

impl Default for PathRules {
    fn default() -> Self {
        Self { normalize: true, merge_slashes: true, escaped_slashes: EscapedSlashes::Reject }
    }
}

/// What happens to a path with `%2F` or `%5C` in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EscapedSlashes {
    /// 400 `invalid_path`.
    #[default]
    Reject,
    /// Kept, escaped, as part of its segment (`%2f` is sent on as `%2F`).
    Keep,
}

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A `..` would climb above the root.
    #[error("the path climbs above the root")]
    AboveRoot,
    /// An escaped `/` or `\`, and `escaped_slashes = "reject"`.
    #[error("an escaped slash (%2F or %5C) in the path")]
    EscapedSlash,
    /// A `%` not followed by two hex digits.
    #[error("a malformed percent-escape in the path")]
    BadEscape,
}

/// The normal form of `path` under `rules`: `None` when it is normal already (the common
/// case, which allocates nothing), else the path to use instead. A path that does not start
/// with `/` (`*`, of `OPTIONS *`) is left alone.
pub fn normalize(path: &str, rules: &PathRules) -> Result<Option<String>, PathError> {
    if !rules.normalize || !path.starts_with('/') || is_normal(path.as_bytes(), rules) {
        return Ok(None);
    }
    let decoded = decode(path.as_bytes(), rules.escaped_slashes)?;
    let mut segments: Vec<&str> = Vec::new();
    // Whether the path ends in a slash that no segment gives it: after a last `.` or `..`,
    // or an empty segment that was merged away.
    let mut trailing = false;
    for segment in decoded[1..].split('/') {
        trailing = matches!(segment, "." | "..") || (segment.is_empty() && rules.merge_slashes);
        match segment {
            "." => {}
            "" if rules.merge_slashes => {}
            ".." => {
                segments.pop().ok_or(PathError::AboveRoot)?;
            }
            _ => segments.push(segment),
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if trailing || segments.is_empty() {
        out.push('/');
    }
    Ok(if out == path { None } else { Some(out) })
}

/// Whether `path` has nothing to normalize: no escape, no dot right after a slash, no empty
/// segment (when those are merged).
fn is_normal(path: &[u8], rules: &PathRules) -> bool {
    let mut previous = 0u8;
    for &byte in path {
        match (previous, byte) {
            (_, b'%') | (b'/', b'.') => return false,
            (b'/', b'/') if rules.merge_slashes => return false,
            _ => {}
        }
        previous = byte;
    }
    true
}

/// Decodes unreserved escapes, upper-cases the others, and applies `escaped_slashes`. Only
/// ASCII is ever written in place of an escape, so UTF-8 in `path` stays UTF-8.
fn decode(path: &[u8], slashes: EscapedSlashes) -> Result<String, PathError> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let byte = path[i];
        if byte != b'%' {
            out.push(byte);
            i += 1;
            continue;
        }
        let (Some(high), Some(low)) =
            (path.get(i + 1).and_then(hex_digit), path.get(i + 2).and_then(hex_digit))
        else {
            return Err(PathError::BadEscape);
        };
        let decoded = high << 4 | low;
        if decoded.is_ascii_alphanumeric() || b"-._~".contains(&decoded) {
            out.push(decoded);
        } else if decoded == b'/' || decoded == b'\\' {
            match slashes {
                EscapedSlashes::Reject => return Err(PathError::EscapedSlash),
                EscapedSlashes::Keep => push_escape(&mut out, decoded),
            }
        } else {
            push_escape(&mut out, decoded);
        }
        i += 3;
    }
    // Cannot fail: ASCII replaced ASCII. Refusing the path is the answer if it ever did.
    String::from_utf8(out).map_err(|_| PathError::BadEscape)
}

fn hex_digit(byte: &u8) -> Option<u8> {
    char::from(*byte).to_digit(16).map(|d| d as u8)
}

fn push_escape(out: &mut Vec<u8>, byte: u8) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[b'%', DIGITS[usize::from(byte >> 4)], DIGITS[usize::from(byte & 15)]]);
}

/// Whether route prefix `prefix` matches `path` segment-wise: `/api` matches `/api` and
/// `/api/x`, not `/apix`; a prefix ending in `/` matches anything that starts with it.
pub(crate) fn prefix_matches(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        None => false,
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DEFAULT: PathRules =
        PathRules { normalize: true, merge_slashes: true, escaped_slashes: EscapedSlashes::Reject };

    fn norm(path: &str, rules: &PathRules) -> Result<String, PathError> {
        normalize(path, rules).map(|out| out.unwrap_or_else(|| path.to_owned()))
    }

    #[test]
    fn the_bypasses_that_were_found_are_closed() {
        assert_eq!(norm("/public/../hs/x", &DEFAULT).unwrap(), "/hs/x");
        assert_eq!(norm("/public/%2e%2e/hs/x", &DEFAULT).unwrap(), "/hs/x");
        assert_eq!(norm("/public/%2E%2e/hs/x", &DEFAULT).unwrap(), "/hs/x");
        assert_eq!(norm("/public/..", &DEFAULT).unwrap(), "/");
        assert_eq!(norm("/public/.%2e/hs", &DEFAULT).unwrap(), "/hs");
        assert_eq!(norm("/%68s/x", &DEFAULT).unwrap(), "/hs/x", "an escaped letter is the letter");
    }

    #[test]
    fn dot_segments_follow_rfc_3986() {
        for (path, want) in [
            ("/a/b/c/./../../g", "/a/g"),
            ("/a/./b", "/a/b"),
            ("/a/b/.", "/a/b/"),
            ("/a/b/..", "/a/"),
            ("/a/b/../", "/a/"),
            ("/.", "/"),
            ("/a/.b/..c", "/a/.b/..c"),
            ("/a/...", "/a/..."),
            ("/", "/"),
        ] {
            assert_eq!(norm(path, &DEFAULT).unwrap(), want, "{path}");
        }
        assert_eq!(norm("/..", &DEFAULT), Err(PathError::AboveRoot));
        assert_eq!(norm("/a/../..", &DEFAULT), Err(PathError::AboveRoot));
        assert_eq!(norm("/a/../../b", &DEFAULT), Err(PathError::AboveRoot));
    }

    #[test]
    fn slashes_merge_only_when_asked() {
        assert_eq!(norm("//a///b//", &DEFAULT).unwrap(), "/a/b/");
        let keep = PathRules { merge_slashes: false, ..DEFAULT };
        assert_eq!(normalize("/a//b", &keep), Ok(None));
        assert_eq!(norm("/a//../b", &keep).unwrap(), "/a/b", "`..` removes the empty segment");
        assert_eq!(norm("/a//..", &DEFAULT).unwrap(), "/", "merged before dots are removed");
    }

    #[test]
    fn escapes_are_decoded_kept_or_refused() {
        assert_eq!(norm("/a%7eb%2d%5F", &DEFAULT).unwrap(), "/a~b-_");
        assert_eq!(norm("/a%20b%3f", &DEFAULT).unwrap(), "/a%20b%3F", "reserved stays escaped");
        assert_eq!(norm("/a%2fb", &DEFAULT), Err(PathError::EscapedSlash));
        assert_eq!(norm("/a%5Cb", &DEFAULT), Err(PathError::EscapedSlash));
        let keep = PathRules { escaped_slashes: EscapedSlashes::Keep, ..DEFAULT };
        assert_eq!(norm("/a/%2f/../b%5c", &keep).unwrap(), "/a/b%5C");
        for bad in ["/a%", "/a%2", "/a%zz", "/%g0"] {
            assert_eq!(norm(bad, &DEFAULT), Err(PathError::BadEscape), "{bad}");
        }
    }

    #[test]
    fn utf_8_in_a_path_survives() {
        assert_eq!(norm("/caf\u{e9}/./%41", &DEFAULT).unwrap(), "/caf\u{e9}/A");
        assert_eq!(norm("/\u{1f600}/../x%2e", &DEFAULT).unwrap(), "/x.");
    }

    #[test]
    fn normal_paths_are_not_copied_and_off_means_off() {
        for path in ["/", "/kv/user:1", "/a/b.c/d.", "/echo"] {
            assert_eq!(normalize(path, &DEFAULT), Ok(None), "{path}");
        }
        let off = PathRules { normalize: false, ..DEFAULT };
        assert_eq!(normalize("/a/../%2f", &off), Ok(None));
        assert_eq!(normalize("*", &DEFAULT), Ok(None));
    }

    /// RFC 3986 §5.2.4 as the RFC writes it, on a string buffer, except that a `..` with
    /// nothing left to remove is an error here instead of being dropped.
    fn remove_dot_segments(path: &str) -> Result<String, PathError> {
        let mut input = path.to_owned();
        let mut output = String::new();
        while !input.is_empty() {
            if let Some(rest) = input.strip_prefix("../").or_else(|| input.strip_prefix("./")) {
                input = rest.to_owned();
            } else if input.starts_with("/./") {
                input.replace_range(..3, "/");
            } else if input == "/." {
                input = "/".into();
            } else if input.starts_with("/../") || input == "/.." {
                let cut = if input == "/.." { 3 } else { 4 };
                input.replace_range(..cut, "/");
                let last = output.rfind('/').ok_or(PathError::AboveRoot)?;
                output.truncate(last);
            } else if input == "." || input == ".." {
                input.clear();
            } else {
                let start = usize::from(input.starts_with('/'));
                let end = input[start..].find('/').map_or(input.len(), |i| i + start);
                output.push_str(&input[..end]);
                input.replace_range(..end, "");
            }
        }
        Ok(output)
    }

    /// The reference: escapes decoded one at a time by a different method, slashes merged by
    /// splitting, then the RFC's own algorithm.
    fn reference(path: &str, rules: &PathRules) -> Result<String, PathError> {
        let mut decoded = String::new();
        let mut rest = path;
        while let Some(at) = rest.find('%') {
            decoded.push_str(&rest[..at]);
            let hex = rest.get(at + 1..at + 3).ok_or(PathError::BadEscape)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(PathError::BadEscape);
            }
            let byte = u8::from_str_radix(hex, 16).map_err(|_| PathError::BadEscape)?;
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    decoded.push(char::from(byte))
                }
                b'/' | b'\\' if rules.escaped_slashes == EscapedSlashes::Reject => {
                    return Err(PathError::EscapedSlash);
                }
                _ => decoded.push_str(&format!("%{byte:02X}")),
            }
            rest = &rest[at + 3..];
        }
        decoded.push_str(rest);
        if rules.merge_slashes {
            let segments: Vec<&str> = decoded.split('/').filter(|s| !s.is_empty()).collect();
            let mut merged = format!("/{}", segments.join("/"));
            if decoded.ends_with('/') && !segments.is_empty() {
                merged.push('/');
            }
            decoded = merged;
        }
        let out = remove_dot_segments(&decoded)?;
        Ok(if out.is_empty() { "/".into() } else { out })
    }

    fn rules() -> impl Strategy<Value = PathRules> {
        (any::<bool>(), any::<bool>()).prop_map(|(merge_slashes, keep)| PathRules {
            normalize: true,
            merge_slashes,
            escaped_slashes: if keep { EscapedSlashes::Keep } else { EscapedSlashes::Reject },
        })
    }

    proptest! {
        #[test]
        fn agrees_with_the_rfc_algorithm(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("/"), Just("a"), Just("b"), Just("."), Just(".."), Just("%2e"),
                    Just("%2E"), Just("%2f"), Just("%5C"), Just("%41"), Just("%7e"), Just("%20"),
                    Just("%"), Just("%z"), Just("~"), Just("-"), Just("\u{e9}"),
                ],
                0..14,
            ),
            rules in rules(),
        ) {
            let path = format!("/{}", parts.concat());
            prop_assert_eq!(norm(&path, &rules), reference(&path, &rules), "{}", path);
        }

        #[test]
        fn the_result_is_normal_and_never_climbs(path in "/[a./%2eE]{0,20}", rules in rules()) {
            if let Ok(out) = norm(&path, &rules) {
                prop_assert_eq!(normalize(&out, &rules), Ok(None), "{} → {}", path, out);
                prop_assert!(!out.split('/').any(|s| s == ".." || s == "."), "{}", out);
            }
        }
    }
}
