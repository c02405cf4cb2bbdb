//! Seed data: entries written into a namespace when the gateway starts.
//!
//! Two formats, told apart by their first non-blank character:
//!
//! * a JSON object, `{"key": value, …}`;
//! * NDJSON, one entry per line: `{"key": "k", "value": value, "ttl_ms": 60000}` (`ttl_ms`
//!   optional; blank lines are skipped).
//!
//! A value that is a JSON string is stored as its UTF-8 text; any other JSON value (an object,
//! a number) as its compact JSON text.

use std::time::Duration;

use serde::Deserialize;

/// One entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedEntry {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Its TTL, if it has one.
    pub ttl: Option<Duration>,
}

/// Why seed data could not be read.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SeedError {
    /// The 1-based line of the problem.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    key: String,
    value: serde_json::Value,
    ttl_ms: Option<u64>,
}

fn bytes(value: serde_json::Value) -> Vec<u8> {
    match value {
        serde_json::Value::String(s) => s.into_bytes(),
        other => other.to_string().into_bytes(),
    }
}

/// Parses seed data in either format.
pub fn parse_seed(text: &str) -> Result<Vec<SeedEntry>, SeedError> {
    if text.trim_start().starts_with('{') && !is_ndjson(text) {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| SeedError { line: e.line(), message: e.to_string() })?;
        return Ok(object
            .into_iter()
            .map(|(key, value)| SeedEntry { key: key.into_bytes(), value: bytes(value), ttl: None })
            .collect());
    }
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(line)
            .map_err(|e| SeedError { line: index + 1, message: e.to_string() })?;
        entries.push(SeedEntry {
            key: parsed.key.into_bytes(),
            value: bytes(parsed.value),
            ttl: parsed.ttl_ms.map(Duration::from_millis),
        });
    }
    Ok(entries)
}

/// NDJSON: the first non-blank line is a whole JSON object with a `key` field.
fn is_ndjson(text: &str) -> bool {
    let Some(first) = text.lines().find(|line| !line.trim().is_empty()) else { return false };
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first)
        .is_ok_and(|object| object.contains_key("key") && object.contains_key("value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_objects_and_ndjson() {
        let object = parse_seed(r#"{"a": "text", "b": {"n": 1}}"#).unwrap();
        assert_eq!(object.len(), 2);
        assert_eq!(object[0].value, b"text");
        assert_eq!(object[1].value, br#"{"n":1}"#);

        let ndjson =
            "{\"key\":\"k1\",\"value\":\"v\"}\n\n{\"key\":\"k2\",\"value\":7,\"ttl_ms\":500}\n";
        let entries = parse_seed(ndjson).unwrap();
        assert_eq!(
            entries[1],
            SeedEntry {
                key: b"k2".to_vec(),
                value: b"7".to_vec(),
                ttl: Some(Duration::from_millis(500))
            }
        );

        let error = parse_seed("{\"key\":\"k1\",\"value\":\"v\"}\n{\"key\": 3}\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(parse_seed("[1, 2]").is_err());
    }
}
