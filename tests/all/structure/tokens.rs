//! Just enough of a Rust lexer to find module paths: identifiers and the punctuation of paths
//! and `use` trees. Comments, strings (raw and byte too) and character literals are skipped,
//! so `"use crate::x;"` in a string or `'{'` names nothing and opens no block.

/// One token of a Rust source file, as far as paths care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    /// Anything else: operators, literals, lifetimes.
    Other,
}

/// The tokens of `src`.
pub fn lex(src: &str) -> Vec<Tok> {
    let s: Vec<char> = src.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => i = block_comment_end(&s, i),
            'r' | 'b' if raw_string_start(&s, i).is_some() => {
                let (quote, hashes) = raw_string_start(&s, i).expect("checked");
                i = raw_string_end(&s, quote + 1, hashes);
                out.push(Tok::Other);
            }
            'b' if at(i + 1) == '"' => {
                i = string_end(&s, i + 2);
                out.push(Tok::Other);
            }
            'b' if at(i + 1) == '\'' => {
                i = char_end(&s, i + 1).expect("a byte literal");
                out.push(Tok::Other);
            }
            '"' => {
                i = string_end(&s, i + 1);
                out.push(Tok::Other);
            }
            '\'' => {
                // A character literal, or a lifetime or label (its name lexes as an identifier).
                i = char_end(&s, i).unwrap_or(i + 1);
                out.push(Tok::Other);
            }
            _ if c == '_' || c.is_alphanumeric() => {
                let start = if c == 'r' && at(i + 1) == '#' { i + 2 } else { i };
                let mut j = start;
                while j < s.len() && (s[j] == '_' || s[j].is_alphanumeric()) {
                    j += 1;
                }
                let word: String = s[start..j].iter().collect();
                let number = word.starts_with(|c: char| c.is_ascii_digit());
                out.push(if number { Tok::Other } else { Tok::Ident(word) });
                i = j;
            }
            ':' if at(i + 1) == ':' => {
                out.push(Tok::Sep);
                i += 2;
            }
            _ => {
                out.push(match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ',' => Tok::Comma,
                    ';' => Tok::Semi,
                    '*' => Tok::Star,
                    _ => Tok::Other,
                });
                i += 1;
            }
        }
    }
    out
}

/// Past the block comment opening at `i`; block comments nest.
fn block_comment_end(s: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < s.len() {
        if s[i] == '/' && s.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// For `r"`, `r#"`, `br##"` …: the index of the opening quote and the number of `#`s.
fn raw_string_start(s: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (s[i - 1] == '_' || s[i - 1].is_alphanumeric()) {
        return None;
    }
    let mut j = if s[i] == 'b' { i + 1 } else { i };
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|&&c| c == '#').count();
    (s.get(j + hashes) == Some(&'"')).then_some((j + hashes, hashes))
}

/// Past the raw string whose body starts at `i`.
fn raw_string_end(s: &[char], mut i: usize, hashes: usize) -> usize {
    while i < s.len() {
        if s[i] == '"' && s[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// Past the string whose body starts at `i`.
fn string_end(s: &[char], mut i: usize) -> usize {
    while i < s.len() {
        match s[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Past the character literal whose opening quote is at `i`, or `None` for a lifetime.
fn char_end(s: &[char], i: usize) -> Option<usize> {
    if s.get(i + 1) == Some(&'\\') {
        let close = s.get(i + 3..)?.iter().position(|&c| c == '\'')?;
        return Some(i + 3 + close + 1);
    }
    (s.get(i + 2) == Some(&'\'')).then_some(i + 3)
}

/// A path a `use` tree names, as its segments, and the name it binds (`None` for a glob).
pub type Binding = (Vec<String>, Option<String>);

/// What a `use` tree (the tokens after `use`, up to its `;`) brings in: each path it names, as
/// its segments, with the name it binds (`as` renames; `self` inside braces binds the prefix's
/// last segment), or `None` for a glob (`*`), whose names are not known here.
pub fn use_bindings(tree: &[Tok]) -> Vec<Binding> {
    let mut out = Vec::new();
    let mut pos = 0;
    use_tree(tree, &mut pos, &[], &mut out);
    out
}

fn use_tree(t: &[Tok], pos: &mut usize, prefix: &[String], out: &mut Vec<Binding>) {
    let mut path = prefix.to_vec();
    if t.get(*pos) == Some(&Tok::Sep) {
        *pos += 1;
    }
    let mut bound = None;
    loop {
        match t.get(*pos) {
            Some(Tok::Ident(word)) => {
                if word != "self" || path.is_empty() {
                    path.push(word.clone());
                }
                bound = path.last().cloned();
                *pos += 1;
                match (t.get(*pos), t.get(*pos + 1)) {
                    (Some(Tok::Sep), _) => {
                        *pos += 1;
                        continue;
                    }
                    (Some(Tok::Ident(word)), alias) if word == "as" => {
                        bound = match alias {
                            Some(Tok::Ident(alias)) if alias != "_" => Some(alias.clone()),
                            _ => None,
                        };
                        *pos += 2;
                    }
                    _ => {}
                }
                break;
            }
            Some(Tok::Open) => {
                *pos += 1;
                while !matches!(t.get(*pos), Some(Tok::Close) | None) {
                    use_tree(t, pos, &path, out);
                    if t.get(*pos) == Some(&Tok::Comma) {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return;
            }
            Some(Tok::Star) => {
                *pos += 1;
                bound = None;
                break;
            }
            _ => break,
        }
    }
    out.push((path, bound));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(src: &str) -> Vec<String> {
        lex(src)
            .into_iter()
            .filter_map(|t| match t {
                Tok::Ident(word) => Some(word),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn literals_and_comments_name_nothing() {
        let src = r####"a "crate::b" r#"crate::c"# br##"d"## b"e" '{' b'"' '\'' '\u{1F600}' /* f /* g */ h */ // i
            fn j<'k>(l: &'k str) {}"####;
        assert_eq!(idents(src), ["a", "fn", "j", "k", "l", "k", "str"]);
        let opens = lex(src).iter().filter(|t| **t == Tok::Open).count();
        assert_eq!(opens, 1, "only the function body opens a block");
    }

    #[test]
    fn use_trees_expand_to_every_path_and_the_name_it_binds() {
        let tree = lex("{crate::a::{b, c::{self, d as e}, f::*}, super::g as h, i as _};");
        let found = use_bindings(&tree);
        let bindings: Vec<(String, Option<&str>)> =
            found.iter().map(|(path, bound)| (path.join("::"), bound.as_deref())).collect();
        let expected = [
            ("crate::a::b", Some("b")),
            ("crate::a::c", Some("c")),
            ("crate::a::c::d", Some("e")),
            ("crate::a::f", None),
            ("super::g", Some("h")),
            ("i", None),
        ];
        let expected: Vec<(String, Option<&str>)> =
            expected.iter().map(|(p, b)| (p.to_string(), *b)).collect();
        assert_eq!(bindings, expected);
    }
}
