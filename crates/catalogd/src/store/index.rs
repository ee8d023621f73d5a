//! The metas index: for every blob of a catalog's `all.json`, its `schema`, `package` and
//! `name` and where its line lies in the file, so metas queries read only the matching lines.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One blob of `all.json`: its meta fields and its line (including the trailing newline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The blob's `schema`, if it has a string one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The blob's `package`, if it has a string one (an `olm.package` blob has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The blob's `name`, if it has a string one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Byte offset of the line in `all.json`.
    pub offset: u64,
    /// Length of the line in bytes, trailing newline included, so that concatenating the
    /// slices of several entries gives valid JSON lines.
    pub length: u64,
}

impl IndexEntry {
    /// The entry for `blob`, whose line is at `offset` and `length` bytes long. The meta keys
    /// are matched case-insensitively, as upstream decodes `declcfg.Meta` with Go's JSON
    /// decoder; values that are not strings count as absent.
    pub fn for_blob(blob: &Value, offset: u64, length: u64) -> Self {
        let field = |key: &str| -> Option<String> {
            let Value::Object(map) = blob else {
                return None;
            };
            // An exact match wins, so the common case costs one map lookup.
            if let Some(v) = map.get(key) {
                return v.as_str().map(str::to_owned);
            }
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .and_then(|(_, v)| v.as_str().map(str::to_owned))
        };
        Self {
            schema: field("schema"),
            package: field("package"),
            name: field("name"),
            offset,
            length,
        }
    }

    fn span(&self) -> Span {
        Span {
            offset: self.offset,
            length: self.length,
        }
    }
}

/// A byte range of `all.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Where it starts.
    pub offset: u64,
    /// How many bytes.
    pub length: u64,
}

impl Span {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }
}

/// What a metas query asks for; `None` (or an empty string, as upstream) is a wildcard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetasFilter<'a> {
    /// Match the blob's `schema`.
    pub schema: Option<&'a str>,
    /// Match the blob's `package`.
    pub package: Option<&'a str>,
    /// Match the blob's `name`.
    pub name: Option<&'a str>,
}

impl MetasFilter<'_> {
    /// True when no field is constrained, i.e. the query asks for the whole file.
    pub fn is_empty(&self) -> bool {
        [self.schema, self.package, self.name]
            .iter()
            .all(|v| v.is_none_or(str::is_empty))
    }
}

/// The on-disk form, `index.json`.
#[derive(Serialize, Deserialize)]
pub(crate) struct IndexFile {
    /// Bumped when the format changes incompatibly.
    pub version: u32,
    /// Size of the `all.json` the entries describe.
    pub size: u64,
    pub entries: Vec<IndexEntry>,
}

/// The current format version of `index.json`.
pub(crate) const INDEX_VERSION: u32 = 1;

/// A loaded index, with per-field lookup tables so a query touches only candidate entries.
#[derive(Debug, Clone, Default)]
pub struct Index {
    entries: Vec<IndexEntry>,
    size: u64,
    by_schema: HashMap<String, Vec<u32>>,
    by_package: HashMap<String, Vec<u32>>,
    by_name: HashMap<String, Vec<u32>>,
}

impl Index {
    /// Builds the lookup tables over `entries` (in file order) of an `all.json` of `size` bytes.
    /// Fails when an entry lies outside the file or entries are out of order, which would make
    /// queries return garbage.
    pub fn new(entries: Vec<IndexEntry>, size: u64) -> Result<Self, String> {
        let mut index = Index {
            size,
            ..Index::default()
        };
        let mut previous_end = 0u64;
        for (i, e) in entries.iter().enumerate() {
            let end = e
                .offset
                .checked_add(e.length)
                .filter(|end| *end <= size)
                .ok_or_else(|| {
                    format!(
                        "entry {i} ({}+{}) lies outside the {size}-byte file",
                        e.offset, e.length
                    )
                })?;
            if e.offset < previous_end {
                return Err(format!("entry {i} overlaps the entry before it"));
            }
            previous_end = end;
            let i = u32::try_from(i).map_err(|_| "too many entries".to_owned())?;
            for (value, table) in [
                (&e.schema, &mut index.by_schema),
                (&e.package, &mut index.by_package),
                (&e.name, &mut index.by_name),
            ] {
                if let Some(v) = value {
                    table.entry(v.clone()).or_default().push(i);
                }
            }
        }
        index.entries = entries;
        Ok(index)
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// Size of the `all.json` this index describes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The lines matching every given field of `filter`, in file order, with adjacent lines
    /// merged into one span so the server reads them in one go.
    pub fn query(&self, filter: &MetasFilter<'_>) -> Vec<Span> {
        fn wanted(v: Option<&str>) -> Option<&str> {
            v.filter(|s| !s.is_empty())
        }
        let (schema, package, name) = (
            wanted(filter.schema),
            wanted(filter.package),
            wanted(filter.name),
        );
        let mut spans: Vec<Span> = Vec::new();
        let mut push = |s: Span| match spans.last_mut() {
            Some(last) if last.end() == s.offset => last.length += s.length,
            _ => spans.push(s),
        };
        // Start from the smallest candidate list among the constrained fields, then check the
        // others on each candidate: as fast as a set intersection, and already in file order.
        let candidates = [
            (schema, &self.by_schema),
            (package, &self.by_package),
            (name, &self.by_name),
        ]
        .into_iter()
        .filter_map(|(v, table)| v.map(|v| table.get(v).map(Vec::as_slice).unwrap_or(&[])))
        .min_by_key(|list| list.len());
        let matches = |e: &IndexEntry| {
            [(schema, &e.schema), (package, &e.package), (name, &e.name)]
                .iter()
                .all(|(want, have)| want.is_none_or(|w| have.as_deref() == Some(w)))
        };
        match candidates {
            None => self.entries.iter().for_each(|e| push(e.span())),
            Some(list) => list
                .iter()
                .filter_map(|&i| self.entries.get(i as usize))
                .filter(|e| matches(e))
                .for_each(|e| push(e.span())),
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(schema: &str, package: Option<&str>, name: &str, offset: u64) -> IndexEntry {
        IndexEntry {
            schema: Some(schema.into()),
            package: package.map(Into::into),
            name: Some(name.into()),
            offset,
            length: 10,
        }
    }

    fn sample() -> Index {
        Index::new(
            vec![
                entry("olm.package", None, "a", 0),
                entry("olm.channel", Some("a"), "stable", 10),
                entry("olm.bundle", Some("a"), "a.v1", 20),
                entry("olm.package", None, "b", 30),
                entry("olm.channel", Some("b"), "stable", 40),
                entry("olm.bundle", Some("b"), "b.v1", 50),
            ],
            60,
        )
        .unwrap()
    }

    fn q(schema: Option<&str>, package: Option<&str>, name: Option<&str>) -> Vec<(u64, u64)> {
        sample()
            .query(&MetasFilter {
                schema,
                package,
                name,
            })
            .iter()
            .map(|s| (s.offset, s.length))
            .collect()
    }

    #[test]
    fn queries_intersect_fields_and_merge_adjacent_lines() {
        assert_eq!(q(None, None, None), vec![(0, 60)]);
        assert_eq!(q(Some(""), Some(""), None), vec![(0, 60)]);
        assert_eq!(q(None, Some("a"), None), vec![(10, 20)]);
        assert_eq!(q(Some("olm.channel"), None, None), vec![(10, 10), (40, 10)]);
        assert_eq!(q(Some("olm.package"), None, Some("b")), vec![(30, 10)]);
        assert_eq!(q(None, None, Some("stable")), vec![(10, 10), (40, 10)]);
        assert_eq!(
            q(Some("olm.channel"), Some("b"), Some("stable")),
            vec![(40, 10)]
        );
        assert_eq!(q(Some("olm.bundle"), Some("zzz"), None), vec![]);
        assert_eq!(q(Some("nope"), None, None), vec![]);
    }

    #[test]
    fn meta_keys_match_case_insensitively_and_need_strings() {
        let e = IndexEntry::for_blob(&json!({"Schema": "x", "package": 3, "NAME": "n"}), 5, 7);
        assert_eq!(e.schema.as_deref(), Some("x"));
        assert_eq!(e.package, None);
        assert_eq!(e.name.as_deref(), Some("n"));
        assert_eq!((e.offset, e.length), (5, 7));
    }

    #[test]
    fn entries_outside_the_file_are_rejected() {
        assert!(Index::new(vec![entry("s", None, "n", 55)], 60).is_err());
        assert!(
            Index::new(
                vec![entry("s", None, "n", 10), entry("s", None, "m", 5)],
                60
            )
            .is_err()
        );
    }
}
