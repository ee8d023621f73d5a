//! The served content the API reads: every catalog's current `all.json`, opened together with
//! its index so that one request reads one content per catalog even while a new one is put,
//! blobs read at their offsets, and each content's [`Summary`] worked out once.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt as _;
use std::sync::{Arc, Mutex, PoisonError};

use catalogd_store::store::{Index, Opened, Store, StoreError};
use sha2::{Digest as _, Sha256};

use crate::objects::Origin;
use crate::summary::{Summary, summarize};

/// The largest blob read for one object (the store's own limits keep real ones far smaller).
const MAX_BLOB: u64 = 64 << 20;

/// One catalog's served content, opened.
#[derive(Debug)]
pub struct Served {
    /// The catalog.
    pub catalog: String,
    /// Its open `all.json`.
    pub opened: Opened,
    /// Its index.
    pub index: Arc<Index>,
    /// When it was first stored, RFC 3339.
    pub created: String,
}

impl Served {
    /// Where its objects come from, when `version` is served.
    pub fn origin<'a>(&'a self, version: &'a str) -> Origin<'a> {
        Origin {
            hash: &self.opened.stored.hash,
            created: &self.created,
            version,
        }
    }

    /// The bytes of the blob at `offset`, `length` long (its newline dropped).
    ///
    /// # Errors
    ///
    /// When it cannot be read.
    pub fn blob(&self, offset: u64, length: u64) -> std::io::Result<Vec<u8>> {
        if length > MAX_BLOB {
            return Err(std::io::Error::other(format!(
                "a blob of {length} bytes is more than the {MAX_BLOB} this API reads"
            )));
        }
        let mut buf = vec![0; usize::try_from(length).unwrap_or(0)];
        self.opened.file.read_exact_at(&mut buf, offset)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Ok(buf)
    }
}

/// Every catalog's served content, sorted by catalog.
///
/// # Errors
///
/// When the store cannot be read.
pub fn served(store: &Store) -> Result<Vec<Served>, StoreError> {
    let mut out = Vec::new();
    for catalog in store.list()? {
        if let Some((opened, index)) = store.open_with_index(&catalog)? {
            let created = jiff::Timestamp::try_from(opened.stored.last_modified)
                .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
                .unwrap_or_default();
            out.push(Served {
                catalog,
                opened,
                index,
                created,
            });
        }
    }
    Ok(out)
}

/// The resourceVersion of everything served: it changes when any catalog's content does.
pub fn version(served: &[Served]) -> String {
    let mut digest = Sha256::new();
    for s in served {
        digest.update(s.catalog.as_bytes());
        digest.update(b"\0");
        digest.update(s.opened.stored.hash.as_bytes());
        digest.update(b"\n");
    }
    hex::encode(&digest.finalize()[..8])
}

/// Reads a file from its start without moving a shared offset.
struct At<'a> {
    file: &'a File,
    position: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

/// Summaries by catalog, each for the content hash it was made from. One is worked out at a
/// time (`working`), so concurrent requests for new content parse it once.
#[derive(Debug, Default)]
pub struct Summaries {
    made: Mutex<HashMap<String, (String, Arc<Summary>)>>,
    working: Mutex<()>,
}

impl Summaries {
    /// The summary of `served`, worked out now if its content is new.
    ///
    /// # Errors
    ///
    /// When the content cannot be read.
    pub fn of(&self, served: &Served) -> std::io::Result<Arc<Summary>> {
        let hash = &served.opened.stored.hash;
        let cached = || {
            self.lock()
                .get(&served.catalog)
                .filter(|(h, _)| h == hash)
                .map(|(_, s)| s.clone())
        };
        if let Some(summary) = cached() {
            return Ok(summary);
        }
        let _working = self.working.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(summary) = cached() {
            return Ok(summary);
        }
        let reader = BufReader::with_capacity(
            1 << 16,
            At {
                file: &served.opened.file,
                position: 0,
            },
        );
        let summary = Arc::new(summarize(reader)?);
        self.lock()
            .insert(served.catalog.clone(), (hash.clone(), summary.clone()));
        Ok(summary)
    }

    /// Forgets catalogs no longer served.
    pub fn retain(&self, served: &[Served]) {
        self.lock()
            .retain(|catalog, _| served.iter().any(|s| &s.catalog == catalog));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Arc<Summary>)>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
