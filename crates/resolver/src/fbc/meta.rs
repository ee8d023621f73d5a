//! Reading a blob's fields from its JSON text in one pass, without building a value tree:
//! `schema`, `package` and `name` (matched case-insensitively, as Go's JSON decoder matches them
//! upstream; two keys that differ only in case are an error), and, borrowed as raw JSON, the
//! fields the typed schemas need. Everything else is skipped.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The fields of a blob that the model reads.
#[derive(Default)]
pub(crate) struct Fields<'a> {
    /// Borrowed from the blob's text unless the JSON string had escapes.
    pub schema: Option<Cow<'a, str>>,
    pub package: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub default_channel: Option<&'a RawValue>,
    pub entries: Option<&'a RawValue>,
    pub image: Option<&'a RawValue>,
    pub properties: Option<&'a RawValue>,
}

/// Reads the fields of the blob `json`; the error is a sentence.
pub(crate) fn read(json: &str) -> Result<Fields<'_>, String> {
    if !json.trim_start().starts_with('{') {
        return Err("a catalog blob must be an object".into());
    }
    serde_json::from_str::<Fields<'_>>(json).map_err(|e| {
        let text = e.to_string();
        text.rsplit_once(" at line ")
            .map_or(text.clone(), |(m, _)| m.to_owned())
    })
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor).map(Key)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor(std::marker::PhantomData))
    }
}

struct FieldsVisitor<'a>(std::marker::PhantomData<&'a ()>);

/// Stores a meta field, refusing a second key that differs only in case, and a non-string.
fn meta<'de: 'a, 'a, A: MapAccess<'de>>(
    map: &mut A,
    slot: &mut Option<Cow<'a, str>>,
    seen: &mut bool,
    key: &str,
) -> Result<(), A::Error> {
    if *seen {
        return Err(de::Error::custom(format!(
            "the blob has several keys named {key:?} that differ only in case"
        )));
    }
    *seen = true;
    *slot = map
        .next_value::<Option<Key<'de>>>()
        .map_err(|_| de::Error::custom(format!("{key:?} must be a string")))?
        .map(|k| k.0);
    Ok(())
}

impl<'de: 'a, 'a> Visitor<'de> for FieldsVisitor<'a> {
    type Value = Fields<'a>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a catalog blob (an object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'a>, A::Error> {
        let mut fields = Fields::default();
        let mut seen = [false; 3];
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if key.eq_ignore_ascii_case("schema") {
                meta(&mut map, &mut fields.schema, &mut seen[0], "schema")?;
            } else if key.eq_ignore_ascii_case("package") {
                meta(&mut map, &mut fields.package, &mut seen[1], "package")?;
            } else if key.eq_ignore_ascii_case("name") {
                meta(&mut map, &mut fields.name, &mut seen[2], "name")?;
            } else {
                let slot = match key.as_ref() {
                    "defaultChannel" => &mut fields.default_channel,
                    "entries" => &mut fields.entries,
                    "image" => &mut fields.image,
                    "properties" => &mut fields.properties,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                };
                *slot = Some(map.next_value::<&'a RawValue>()?);
            }
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_keys_match_in_any_case_and_other_fields_stay_raw() {
        let f = read(r#"{"Schema":"olm.bundle","NAME":"b","package":"p","image":"i","properties":[{"type":"x"}],"big":{"a":[1,2]}}"#).unwrap();
        assert_eq!(f.schema.as_deref(), Some("olm.bundle"));
        assert_eq!(f.name.as_deref(), Some("b"));
        assert_eq!(f.package.as_deref(), Some("p"));
        assert_eq!(f.image.map(RawValue::get), Some("\"i\""));
        assert_eq!(f.properties.map(RawValue::get), Some(r#"[{"type":"x"}]"#));
    }

    #[test]
    fn bad_meta_is_a_sentence() {
        assert_eq!(
            read(r#"{"schema":"a","SCHEMA":"b"}"#).err().unwrap(),
            "the blob has several keys named \"schema\" that differ only in case"
        );
        assert_eq!(
            read(r#"{"name":3}"#).err().unwrap(),
            "\"name\" must be a string"
        );
        assert_eq!(
            read("[1]").err().unwrap(),
            "a catalog blob must be an object"
        );
        assert!(read(r#"{"schema":null}"#).unwrap().schema.is_none());
    }
}
