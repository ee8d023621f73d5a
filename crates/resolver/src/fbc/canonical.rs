//! The canonical form of catalog content: byte for byte what upstream catalogd serves as
//! `all.json`. Each blob is one line of compact JSON with object keys sorted at every level,
//! encoded the way Go's `encoding/json` encodes a `map[string]any` with HTML escaping off:
//! numbers pass through float64 (so huge integers lose precision, as upstream), and U+2028 and
//! U+2029 are escaped. The content hash is the sha256 of this rendering, so equal content gives
//! an equal hash whatever its source, file layout or formatting.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Appends the canonical encoding of `value` (no trailing newline) to `out`.
pub fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n.as_f64().unwrap_or(f64::NAN), out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        // serde_json's map is a BTreeMap: keys iterate in byte order, as Go sorts them.
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write_value(v, out);
            }
            out.push(b'}');
        }
    }
}

/// Go's float64 encoding: shortest round-trip digits, plain notation for magnitudes in
/// [1e-6, 1e21), exponent notation (`1e+21`, `1e-7`) outside it.
fn write_number(f: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exp}");
            }
            _ => out.extend_from_slice(s.as_bytes()),
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            0x00..=0x1f => None,
            // U+2028 and U+2029 are E2 80 A8 / E2 80 A9 in UTF-8.
            0xe2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)) =>
            {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(if bytes[i + 2] == 0xa8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 3;
                start = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Renders blobs as canonical JSON lines, each followed by a newline.
pub fn render<'a>(blobs: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
    let mut out = Vec::new();
    for blob in blobs {
        write_value(blob, &mut out);
        out.push(b'\n');
    }
    out
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(v: &Value) -> String {
        let mut out = Vec::new();
        write_value(v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keys_are_sorted_and_output_is_compact() {
        let v = json!({"b": 1, "a": {"d": [1, 2], "c": null}, "A": true});
        assert_eq!(enc(&v), r#"{"A":true,"a":{"c":null,"d":[1,2]},"b":1}"#);
    }

    #[test]
    fn numbers_are_encoded_as_go_encodes_float64() {
        let cases: &[(&str, &str)] = &[
            ("0", "0"),
            ("1", "1"),
            ("-3", "-3"),
            ("1.5", "1.5"),
            ("0.1", "0.1"),
            ("1.0", "1"),
            ("100000000000000000000", "100000000000000000000"),
            ("1e21", "1e+21"),
            // Expected values checked against Go 1.26's encoding/json.
            ("123456789012345678901234", "1.2345678901234569e+23"),
            ("1.2345678901234568e23", "1.2345678901234569e+23"),
            ("-2.5E-8", "-2.5e-8"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1e-7"),
            ("1.5e-10", "1.5e-10"),
            ("9007199254740993", "9007199254740992"),
        ];
        for (input, want) in cases {
            let v: Value = serde_json::from_str(input).unwrap();
            assert_eq!(enc(&v), *want, "encoding {input}");
        }
    }

    #[test]
    fn strings_are_escaped_as_go_does_without_html_escaping() {
        let v = json!("<a href=\"x\">&</a>\n\t\u{1}\u{8}\u{c}\u{7f}é\u{2028}\u{2029}\\");
        assert_eq!(
            enc(&v),
            "\"<a href=\\\"x\\\">&</a>\\n\\t\\u0001\\b\\f\u{7f}é\\u2028\\u2029\\\\\""
        );
    }

    #[test]
    fn hash_is_lowercase_hex_sha256() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
