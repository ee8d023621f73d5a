//! Every blob of a catalog in one buffer, with a fixed-size entry per blob: see [`Blobs`].

use std::collections::HashMap;
use std::sync::Arc;

use super::origin::Origin;

/// One blob as read: its JSON text, its `schema`, `package` and `name` (empty when absent), and
/// where it was read. A view into [`Blobs`].
#[derive(Debug, Clone, Copy)]
pub struct Blob<'a> {
    /// The blob as JSON text, as read (YAML documents converted to JSON).
    pub raw: &'a str,
    /// Its `schema`.
    pub schema: &'a str,
    /// Its `package`.
    pub package: &'a str,
    /// Its `name`.
    pub name: &'a str,
    file: &'a Arc<str>,
    line: u32,
}

impl Blob<'_> {
    /// Where it was read.
    pub fn origin(&self) -> Origin {
        Origin {
            file: self.file.clone(),
            line: self.line as usize,
        }
    }

    /// The blob as a JSON value (parsed on each call).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(self.raw).unwrap_or_default()
    }
}

/// Where one blob lies in [`Blobs`]: 32 bytes, whatever the blob's size, so a catalog of
/// millions of tiny blobs costs a small multiple of its size, not tens of times it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u32,
    len: u32,
    schema: u32,
    package: u32,
    /// Offset of the name in `text`, or in `names` when `name_len` has [`IN_NAMES`] set.
    name_start: u32,
    name_len: u32,
    file: u32,
    line: u32,
}

/// Set in `Entry::name_len` when the name is in `Blobs::names` (it had escapes in the JSON, so it
/// is not a slice of the text).
const IN_NAMES: u32 = 1 << 31;

/// Every blob of a catalog, in file-walk order: the JSON text of all of them in one buffer, and
/// per blob a fixed-size entry. Schemas and packages are interned; a name is a slice of its
/// blob's own text when it can be.
#[derive(Debug, Clone, Default)]
pub struct Blobs {
    text: String,
    names: String,
    entries: Vec<Entry>,
    symbols: Vec<Box<str>>,
    symbol_ids: HashMap<Box<str>, u32>,
    files: Vec<Arc<str>>,
}

/// Why a blob could not be added.
#[derive(Debug)]
pub(crate) struct TooLarge;

impl Blobs {
    /// How many blobs there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total bytes of JSON text held.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// The blobs, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Blob<'_>> + '_ {
        self.entries.iter().map(|e| self.view(e))
    }

    /// The `i`th blob.
    pub fn get(&self, i: usize) -> Option<Blob<'_>> {
        self.entries.get(i).map(|e| self.view(e))
    }

    fn view(&self, e: &Entry) -> Blob<'_> {
        fn slice(s: &str, start: u32, len: u32) -> &str {
            s.get(start as usize..start as usize + len as usize)
                .unwrap_or_default()
        }
        let name = if e.name_len & IN_NAMES != 0 {
            slice(&self.names, e.name_start, e.name_len & !IN_NAMES)
        } else {
            slice(&self.text, e.name_start, e.name_len)
        };
        let symbol = |id: u32| self.symbols.get(id as usize).map_or("", |s| s);
        Blob {
            raw: slice(&self.text, e.start, e.len),
            schema: symbol(e.schema),
            package: symbol(e.package),
            name,
            file: &self.files[e.file as usize],
            line: e.line,
        }
    }

    pub(crate) fn reserve_text(&mut self, bytes: usize) {
        self.text.reserve(bytes);
    }

    pub(crate) fn add_file(&mut self, name: Arc<str>) -> u32 {
        self.files.push(name);
        u32::try_from(self.files.len() - 1).unwrap_or(u32::MAX)
    }

    pub(crate) fn file(&self, id: u32) -> Arc<str> {
        self.files
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from(""))
    }

    fn symbol(&mut self, value: &str) -> u32 {
        if let Some(id) = self.symbol_ids.get(value) {
            return *id;
        }
        let id = u32::try_from(self.symbols.len()).unwrap_or(u32::MAX);
        self.symbols.push(value.into());
        self.symbol_ids.insert(value.into(), id);
        id
    }

    /// Appends a blob whose `name` is `name` (a slice of `json`, or an unescaped copy).
    pub(crate) fn push(
        &mut self,
        json: &str,
        schema: &str,
        package: &str,
        name: &str,
        file: u32,
        line: usize,
    ) -> Result<(), TooLarge> {
        let start = u32::try_from(self.text.len()).map_err(|_| TooLarge)?;
        let len = u32::try_from(json.len()).map_err(|_| TooLarge)?;
        start.checked_add(len).ok_or(TooLarge)?;
        // A name borrowed from the blob's text lies at the same offset in the copy.
        let within = (name.as_ptr() as usize).checked_sub(json.as_ptr() as usize);
        let (name_start, name_len) = match within {
            Some(offset) if !name.is_empty() && offset + name.len() <= json.len() => (
                start + u32::try_from(offset).map_err(|_| TooLarge)?,
                u32::try_from(name.len()).map_err(|_| TooLarge)?,
            ),
            _ if name.is_empty() => (0, 0),
            _ => {
                let at = u32::try_from(self.names.len()).map_err(|_| TooLarge)?;
                let len = u32::try_from(name.len())
                    .ok()
                    .filter(|l| l & IN_NAMES == 0)
                    .ok_or(TooLarge)?;
                self.names.push_str(name);
                (at, len | IN_NAMES)
            }
        };
        self.text.push_str(json);
        let entry = Entry {
            start,
            len,
            schema: self.symbol(schema),
            package: self.symbol(package),
            name_start,
            name_len,
            file,
            line: u32::try_from(line).unwrap_or(u32::MAX),
        };
        self.entries.push(entry);
        Ok(())
    }

    /// Appends every blob of `other`.
    pub(crate) fn append(&mut self, other: &Blobs) {
        let base = u32::try_from(self.files.len()).unwrap_or(u32::MAX);
        self.files.extend(other.files.iter().cloned());
        for e in &other.entries {
            let b = other.view(e);
            // Blobs that fit once fit again unless the total passes 4 GiB, which the loaders
            // refuse before it happens.
            let _ = self.push(
                b.raw,
                b.schema,
                b.package,
                b.name,
                base.saturating_add(e.file),
                e.line as usize,
            );
        }
    }

    /// Releases spare capacity once loading is done, when there is much of it (shrinking
    /// copies, which costs more than a little slack).
    pub(crate) fn shrink(&mut self) {
        if self.text.capacity() > self.text.len() + self.text.len() / 4 {
            self.text.shrink_to_fit();
        }
        if self.entries.capacity() > self.entries.len() + self.entries.len() / 4 {
            self.entries.shrink_to_fit();
        }
        self.names.shrink_to_fit();
    }
}
