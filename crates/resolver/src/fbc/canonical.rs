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

/// Appends the canonical encoding of the JSON text `json` to `out`, without building a value
/// tree: objects are rendered member by member and their members sorted, which is what
/// `write_value` does for a `Value`. Duplicate keys keep the last value, as Go's map decoding does.
pub fn write_raw(json: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(json);
    Canonical(out).deserialize(&mut de)?;
    de.end()
}

/// A serde seed/visitor that writes what it visits in canonical form.
struct Canonical<'o>(&'o mut Vec<u8>);

impl<'de> serde::de::DeserializeSeed<'de> for Canonical<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// An object key, borrowed from the input when it has no escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::de::Visitor<'de> for Canonical<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        write_number(v as f64, self.0);
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        write_number(v as f64, self.0);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        write_number(v, self.0);
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        write_string(v, self.0);
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let mark = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Canonical(&mut *self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut members: Vec<(Key<'de>, Vec<u8>)> = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let mut value = Vec::new();
            map.next_value_seed(Canonical(&mut value))?;
            members.push((key, value));
        }
        // Stable: among equal keys the last one read comes last, and is the one kept.
        members.sort_by(|a, b| a.0.0.cmp(&b.0.0));
        self.0.push(b'{');
        let mut first = true;
        for (i, (key, value)) in members.iter().enumerate() {
            if members.get(i + 1).is_some_and(|next| next.0.0 == key.0) {
                continue;
            }
            if !first {
                self.0.push(b',');
            }
            first = false;
            write_string(&key.0, self.0);
            self.0.push(b':');
            self.0.extend_from_slice(value);
        }
        self.0.push(b'}');
        Ok(())
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

/// Whether any of the 8 bytes of `w` may need escaping: a control character, `"`, `\\`, or
/// 0xE2 (the lead byte of U+2028 and U+2029). Exact, so the byte loop sees only real hits.
fn may_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (below_space
        | zero(w ^ (ONES * u64::from(b'"')))
        | zero(w ^ (ONES * u64::from(b'\\')))
        | zero(w ^ (ONES * 0xe2)))
        != 0
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Most text needs no escaping: skip it 8 bytes at a time.
        while let Some(chunk) = bytes.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            if may_escape(u64::from_le_bytes(word)) {
                break;
            }
            i += 8;
        }
        let Some(&b) = bytes.get(i) else {
            break;
        };
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
    hex::encode(Sha256::digest(bytes))
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
    fn escapes_are_found_wherever_they_fall_in_the_words_skipped_at_once() {
        for special in [
            "\"", "\\", "\n", "\u{1}", "\u{1f}", "\u{2028}", "\u{2029}", "\u{e2}x",
        ] {
            for at in 0..20 {
                for len in [at, at + 1, at + 9, 24] {
                    let text: String = "abcdefghijklmnopqrstuvwxyz"[..at].to_owned()
                        + special
                        + &"é0123456789ABCDEFGHIJKLMNOP"
                            .chars()
                            .take(len - at)
                            .collect::<String>();
                    let mut out = Vec::new();
                    write_string(&text, &mut out);
                    let want = serde_json::to_string(&text)
                        .unwrap()
                        .replace('\u{2028}', "\\u2028")
                        .replace('\u{2029}', "\\u2029");
                    assert_eq!(String::from_utf8(out).unwrap(), want, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn raw_text_renders_exactly_as_its_value_does() {
        let texts = [
            r#"{"b": 1, "a": {"d": [1, 2.5e30, -0.0, 1e-7], "c": null}, "A": true, "s": "<\u2028>\u00e9\n"}"#,
            r#"[]"#,
            r#"{"k": {}, "l": [[], {}], "n": 123456789012345678901234, "u": 18446744073709551615}"#,
            r#""just a string""#,
        ];
        for text in texts {
            let mut raw = Vec::new();
            write_raw(text, &mut raw).unwrap();
            let mut via_value = Vec::new();
            write_value(&serde_json::from_str(text).unwrap(), &mut via_value);
            assert_eq!(
                String::from_utf8(raw).unwrap(),
                String::from_utf8(via_value).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_duplicate_key_keeps_the_last_value_as_go_does() {
        let mut out = Vec::new();
        write_raw(r#"{"a": 1, "b": 2, "a": 3}"#, &mut out).unwrap();
        assert_eq!(out, br#"{"a":3,"b":2}"#);
        assert!(write_raw("{", &mut out).is_err());
    }

    #[test]
    fn hash_is_lowercase_hex_sha256() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
