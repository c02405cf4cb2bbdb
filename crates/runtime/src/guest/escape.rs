//! Guest text made safe for one log line.
//!
//! A guest decides the bytes of its log messages, and of URLs and names that end up in the
//! host's own messages. Written raw, a newline would start a forged log line and an ANSI
//! escape would repaint a terminal. Every control character (C0, DEL, C1), the Unicode line
//! and paragraph separators and the bidirectional overrides are written as `\n`, `\r`, `\t`
//! or `\u{…}`, and a backslash as `\\`, so the escaped text reads back unambiguously.

use std::borrow::Cow;

/// `text` with its control characters escaped; borrowed when there are none (the common
/// case).
pub(crate) fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_not_copied() {
        assert!(matches!(escape_control("plain text, ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            escape_control("a\nFORGED\u{1b}[31m\r\t\\n\0\u{7f}\u{85}\u{202e}"),
            "a\\nFORGED\\u{1b}[31m\\r\\t\\\\n\\u{0}\\u{7f}\\u{85}\\u{202e}"
        );
    }
}
