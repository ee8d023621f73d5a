//! YAML documents to JSON text without a value tree.
//!
//! The first version deserialized each document into a `serde_json::Value` (a map, a string and
//! a vector allocated per node) from an `io::Read` (which saphyr buffers and re-decodes as
//! UTF-8 chunk by chunk), then serialized the value. Here saphyr reads the `&str` itself and
//! each event is written as JSON as it arrives: the same parser, scalar typing and limits, so
//! the same JSON values (the fuzz target `yaml_json` checks this against the value-tree path),
//! at a fraction of the cost. Object members keep the document's order.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// The JSON text of each document of a YAML stream, in one buffer (one allocation per file, not
/// per document), with the line each starts on.
#[derive(Debug, Default)]
pub struct Documents {
    text: Vec<u8>,
    /// (end offset in `text`, 1-based line)
    ends: Vec<(usize, usize)>,
}

impl Documents {
    /// Every document as JSON text, with its line.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        let mut start = 0;
        self.ends.iter().map(move |&(end, line)| {
            let json = std::str::from_utf8(&self.text[start..end]).unwrap_or_default();
            start = end;
            (json, line)
        })
    }

    /// Bytes of JSON text held.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// The buffer the next document's JSON is appended to.
    pub(super) fn begin(&mut self) -> &mut Vec<u8> {
        &mut self.text
    }

    /// Ends the document appended since the last one, which starts on `line`.
    pub(super) fn end(&mut self, line: usize) {
        self.ends.push((self.text.len(), line.max(1)));
    }
}

/// One document, transcoded.
pub struct Doc(Vec<u8>);

impl<'de> de::Deserialize<'de> for Doc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        Json(&mut out).deserialize(d)?;
        Ok(Doc(out))
    }
}

impl Extend<Spanned<Doc>> for Documents {
    fn extend<I: IntoIterator<Item = Spanned<Doc>>>(&mut self, docs: I) {
        for doc in docs {
            self.text.extend_from_slice(&doc.value.0);
            self.ends
                .push((self.text.len(), (doc.referenced.line() as usize).max(1)));
        }
    }
}

/// Parses a YAML stream (valid UTF-8) with `options`, transcoding each non-empty document.
pub fn documents(
    text: &str,
    options: serde_saphyr::Options,
) -> Result<Documents, serde_saphyr::Error> {
    serde_saphyr::from_str_multiple_with_options::<Spanned<Doc>, Documents>(text, options)
}

/// Writes the node it is handed as JSON.
struct Json<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Json<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing a `str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(out, s);
}

impl<'de> Visitor<'de> for Json<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML node")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        let _ = serde_json::to_writer(&mut *self.0, &v);
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        let _ = serde_json::to_writer(&mut *self.0, &v);
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // JSON has no infinities or NaN; upstream's YAML-to-JSON conversion refuses them too.
        if !v.is_finite() {
            return Err(E::custom(format_args!(
                "{v} is not a number JSON can represent"
            )));
        }
        let _ = serde_json::to_writer(&mut *self.0, &v);
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        write_str(self.0, v);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push(b'[');
        let mut first = true;
        loop {
            let mark = out.len();
            if !first {
                out.push(b',');
            }
            if seq.next_element_seed(Json(&mut *out))?.is_none() {
                out.truncate(mark);
                break;
            }
            first = false;
        }
        out.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push(b'{');
        let mut first = true;
        loop {
            let mark = out.len();
            if !first {
                out.push(b',');
            }
            if map.next_key_seed(Key(&mut *out))?.is_none() {
                out.truncate(mark);
                break;
            }
            out.push(b':');
            map.next_value_seed(Json(&mut *out))?;
            first = false;
        }
        out.push(b'}');
        Ok(())
    }
}

/// Writes a mapping key, which JSON needs as a string (as `serde_json::Value` reads keys).
struct Key<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        write_str(self.0, v);
        Ok(())
    }
}
