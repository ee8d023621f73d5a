//! The metas index: for every line (blob) of a catalog's `all.json`, its `schema`, `package`
//! and `name` and where the line lies, so metas queries read only the matching lines.
//!
//! It is kept compact, since it stays in memory while the catalog is served: per line an
//! offset, three spans into one string buffer (a value equal to the previous line's is shared,
//! so a package's name is stored once per run of its blobs), and its place in three sorted
//! orders, about 44 bytes a line whatever the catalog. It is built while content is stored, or
//! rebuilt by reading `all.json` once (after a restart); nothing else is written to disk.

use std::io::BufRead;

/// The three fields a metas query can constrain.
const FIELDS: usize = 3;

/// One line of `all.json`, as the index sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry<'a> {
    /// The blob's `schema` (empty when absent).
    pub schema: &'a str,
    /// The blob's `package` (empty when absent; an `olm.package` blob has none).
    pub package: &'a str,
    /// The blob's `name` (empty when absent).
    pub name: &'a str,
    /// Byte offset of the line in `all.json`.
    pub offset: u64,
    /// Length of the line in bytes, trailing newline included, so that concatenating the
    /// slices of several entries gives valid JSON lines.
    pub length: u64,
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
        self.wanted().iter().all(Option::is_none)
    }

    fn wanted(&self) -> [Option<&str>; FIELDS] {
        [self.schema, self.package, self.name].map(|v| v.filter(|s| !s.is_empty()))
    }
}

/// A field value: a span of `Index::strings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Str {
    start: u32,
    len: u32,
}

/// A loaded index, with per-field sorted orders so a query touches only candidate lines.
#[derive(Debug, Clone, Default)]
pub struct Index {
    size: u64,
    /// Offset of each line; line `i` ends where line `i + 1` starts (the last at `size`).
    offsets: Vec<u64>,
    fields: Vec<[Str; FIELDS]>,
    strings: String,
    /// Per field, the lines with a non-empty value, sorted by (value, line).
    sorted: [Vec<u32>; FIELDS],
}

/// Builds an [`Index`] line by line.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    index: Index,
    next_offset: u64,
    last: [Str; FIELDS],
}

/// Why an index could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IndexError(String);

impl IndexBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next line: `length` bytes (newline included), with the blob's meta fields.
    pub fn push(
        &mut self,
        schema: &str,
        package: &str,
        name: &str,
        length: u64,
    ) -> Result<(), IndexError> {
        let too_big =
            || IndexError("the catalog has more lines or text than the index holds".into());
        let mut fields = [Str::default(); FIELDS];
        for (i, value) in [schema, package, name].into_iter().enumerate() {
            fields[i] = self.intern(i, value).ok_or_else(too_big)?;
        }
        u32::try_from(self.index.offsets.len()).map_err(|_| too_big())?;
        self.index.offsets.push(self.next_offset);
        self.index.fields.push(fields);
        self.next_offset = self.next_offset.saturating_add(length);
        Ok(())
    }

    /// A span for `value`: the previous line's for the same field when equal.
    fn intern(&mut self, field: usize, value: &str) -> Option<Str> {
        if value.is_empty() {
            return Some(Str::default());
        }
        let last = self.last[field];
        if self.index.get(last) == value {
            return Some(last);
        }
        let s = Str {
            start: u32::try_from(self.index.strings.len()).ok()?,
            len: u32::try_from(value.len()).ok()?,
        };
        s.start.checked_add(s.len)?;
        self.index.strings.push_str(value);
        self.last[field] = s;
        Some(s)
    }

    /// The index of a file of exactly the lines pushed.
    pub fn finish(mut self) -> Index {
        self.index.size = self.next_offset;
        self.index.strings.shrink_to_fit();
        self.index.offsets.shrink_to_fit();
        self.index.fields.shrink_to_fit();
        for field in 0..FIELDS {
            let index = &self.index;
            let mut lines: Vec<u32> = (0..index.fields.len())
                .filter(|&i| index.fields[i][field].len > 0)
                .filter_map(|i| u32::try_from(i).ok())
                .collect();
            // Stable: lines with equal values stay in file order.
            lines.sort_by(|&a, &b| index.value(a, field).cmp(index.value(b, field)));
            lines.shrink_to_fit();
            self.index.sorted[field] = lines;
        }
        self.index
    }
}

impl Index {
    /// Builds the index of an `all.json` by reading it once (canonical JSON lines, as the store
    /// writes them).
    pub fn read(reader: impl BufRead) -> std::io::Result<Index> {
        let mut builder = IndexBuilder::new();
        let mut reader = reader;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let text = std::str::from_utf8(&line).map_err(std::io::Error::other)?;
            // Stored content was validated when it was stored: its meta fields are strings.
            let meta = olm_resolver::fbc::blob_meta(text.trim_end()).unwrap_or_default();
            builder
                .push(
                    meta.schema.as_deref().unwrap_or_default(),
                    meta.package.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default(),
                    n as u64,
                )
                .map_err(std::io::Error::other)?;
        }
        Ok(builder.finish())
    }

    fn get(&self, s: Str) -> &str {
        self.strings
            .get(s.start as usize..s.start as usize + s.len as usize)
            .unwrap_or_default()
    }

    fn value(&self, line: u32, field: usize) -> &str {
        self.fields
            .get(line as usize)
            .map_or("", |f| self.get(f[field]))
    }

    fn span(&self, line: usize) -> Span {
        let offset = self.offsets[line];
        let end = self.offsets.get(line + 1).copied().unwrap_or(self.size);
        Span {
            offset,
            length: end - offset,
        }
    }

    /// The memory it holds, in bytes: what serving the catalog costs while it is served.
    pub fn memory_bytes(&self) -> u64 {
        let offsets = self.offsets.capacity() * std::mem::size_of::<u64>();
        let fields = self.fields.capacity() * std::mem::size_of::<[Str; FIELDS]>();
        let sorted: usize = self.sorted.iter().map(|s| s.capacity() * 4).sum();
        (offsets + fields + sorted + self.strings.capacity()) as u64
    }

    /// How many lines there are.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The `i`th line.
    pub fn entry(&self, i: usize) -> Option<IndexEntry<'_>> {
        let fields = self.fields.get(i)?;
        let span = self.span(i);
        Some(IndexEntry {
            schema: self.get(fields[0]),
            package: self.get(fields[1]),
            name: self.get(fields[2]),
            offset: span.offset,
            length: span.length,
        })
    }

    /// Every line, in file order.
    pub fn entries(&self) -> impl Iterator<Item = IndexEntry<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.entry(i))
    }

    /// Size of the `all.json` this index describes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of memory the index holds (for the content-bytes metric and the docs).
    pub fn heap_bytes(&self) -> usize {
        self.offsets.capacity() * 8
            + self.fields.capacity() * std::mem::size_of::<[Str; FIELDS]>()
            + self.strings.capacity()
            + self.sorted.iter().map(|s| s.capacity() * 4).sum::<usize>()
    }

    /// The lines of `field` equal to `value`, in file order.
    fn lines_with(&self, field: usize, value: &str) -> &[u32] {
        let sorted = &self.sorted[field];
        let from = sorted.partition_point(|&l| self.value(l, field) < value);
        let to = sorted.partition_point(|&l| self.value(l, field) <= value);
        &sorted[from..to.max(from)]
    }

    /// The lines matching every given field of `filter`, in file order, with adjacent lines
    /// merged into one span so the server reads them in one go.
    pub fn query(&self, filter: &MetasFilter<'_>) -> Vec<Span> {
        let wanted = filter.wanted();
        let mut spans: Vec<Span> = Vec::new();
        let mut push = |s: Span| match spans.last_mut() {
            Some(last) if last.end() == s.offset => last.length += s.length,
            _ => spans.push(s),
        };
        // Start from the smallest candidate list among the constrained fields, then check the
        // others on each candidate: as fast as a set intersection, and already in file order.
        let candidates = (0..FIELDS)
            .filter_map(|f| wanted[f].map(|v| self.lines_with(f, v)))
            .min_by_key(|list| list.len());
        let matches =
            |line: u32| (0..FIELDS).all(|f| wanted[f].is_none_or(|w| self.value(line, f) == w));
        match candidates {
            None => (0..self.len()).for_each(|i| push(self.span(i))),
            Some(list) => list
                .iter()
                .filter(|&&l| matches(l))
                .for_each(|&l| push(self.span(l as usize))),
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let mut b = IndexBuilder::new();
        for (schema, package, name) in [
            ("olm.package", "", "a"),
            ("olm.channel", "a", "stable"),
            ("olm.bundle", "a", "a.v1"),
            ("olm.package", "", "b"),
            ("olm.channel", "b", "stable"),
            ("olm.bundle", "b", "b.v1"),
        ] {
            b.push(schema, package, name, 10).unwrap();
        }
        b.finish()
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
        assert_eq!(q(None, None, Some("a.v")), vec![]);
    }

    #[test]
    fn entries_read_back_as_pushed() {
        let index = sample();
        assert_eq!(index.len(), 6);
        assert_eq!(index.size(), 60);
        let e = index.entry(4).unwrap();
        assert_eq!(
            (e.schema, e.package, e.name, e.offset, e.length),
            ("olm.channel", "b", "stable", 40, 10)
        );
    }

    #[test]
    fn reading_all_json_finds_meta_keys_in_any_case() {
        let all = "{\"Schema\":\"x\",\"NAME\":\"n\",\"package\":\"p\"}\n{\"schema\":\"y\"}\n";
        let index = Index::read(all.as_bytes()).unwrap();
        let e = index.entry(0).unwrap();
        assert_eq!((e.schema, e.package, e.name), ("x", "p", "n"));
        assert_eq!(
            index.entry(1).unwrap().offset,
            all.find("{\"schema\":\"y\"}").unwrap() as u64
        );
        assert_eq!(index.size(), all.len() as u64);
    }

    #[test]
    fn a_line_costs_a_small_fixed_amount_whatever_the_line_count() {
        let mut b = IndexBuilder::new();
        for i in 0..100_000 {
            b.push("x", "p", if i % 2 == 0 { "" } else { "n" }, 15)
                .unwrap();
        }
        let index = b.finish();
        assert!(
            index.heap_bytes() <= 100_000 * 48,
            "{} bytes for 100,000 lines",
            index.heap_bytes()
        );
    }
}
