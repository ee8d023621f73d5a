//! The content store: each Catalog's canonical content on disk, hash-addressed and swapped
//! atomically, so the server always sees either the last good content or the new one, never a
//! mix, and a crash at any point leaves the last good content served.
//!
//! Layout under the storage root:
//!
//! ```text
//! <root>/<catalog>/<hash>/all.json      canonical JSON lines (what is served)
//! <root>/<catalog>/<hash>/all.json.gz   gzip of all.json, so the server never compresses it
//! <root>/<catalog>/<hash>/owner         uid of the Catalog object the content belongs to
//! <root>/<catalog>/current -> <hash>    symlink naming the served content
//! <root>/<catalog>/.tmp-*               content being written (removed at open)
//! ```
//!
//! `<hash>` is the sha256 of `all.json`, i.e. the Catalog's `status.contentHash`. A put writes
//! and fsyncs a temporary directory, renames it to `<hash>`, points a temporary symlink at it
//! and renames that over `current` (atomic on POSIX), then removes older hash directories. The
//! owner is written inside the hash directory, so content and owner change together: a Catalog
//! deleted and created again under the same name (a new uid) never passes for the old one.
//!
//! The metas index lives in memory only ([`index`]): built while content is put, or rebuilt by
//! reading `all.json` once when first needed after a restart.
//!
//! All functions block on file-system I/O: call them from `tokio::task::spawn_blocking` in
//! async code. `Store` is `Send + Sync`; share it in an `Arc`. Puts and deletes of the same
//! catalog are serialized by a per-catalog lock; reads take no lock (they retry when a
//! concurrent put removes the directory they were about to open).

mod compressor;
mod gzip;
mod index;
mod render;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use olm_resolver::fbc::Fbc;

pub use index::{Index, IndexBuilder, IndexEntry, IndexError, MetasFilter, Span};
pub use render::Rendered;

/// The canonical content file.
pub const ALL_JSON: &str = "all.json";
/// Its gzip.
pub const ALL_JSON_GZ: &str = "all.json.gz";
/// The uid of the Catalog the content belongs to.
pub const OWNER: &str = "owner";
/// The symlink naming the served hash directory.
const CURRENT: &str = "current";
/// Prefix of everything written before it is complete. Catalog names (DNS-1123) and hashes
/// (hex) never start with a dot, so these never collide with content.
const TMP_PREFIX: &str = ".tmp-";
/// How often a read re-resolves `current` when a concurrent put removed what it pointed at.
const RESOLVE_ATTEMPTS: usize = 5;
/// The gzip level of `all.json.gz`: content is compressed once per change, in the background,
/// and served many times. zlib-rs's level 9 is as fast as its 7 and 8 here, and smaller than
/// the level 6 of miniz_oxide catalogd used before (see docs/performance.md).
const GZIP_LEVEL: u32 = 9;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The catalog name is not a DNS-1123 subdomain, so it is not a Kubernetes object name and
    /// could escape the storage root.
    #[error("invalid catalog name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file-system operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The content is larger than the store can index.
    #[error("{0}")]
    TooLarge(String),
    /// Serving the content would take the served catalogs' in-memory indexes past their
    /// budget (`--max-served-index-bytes`).
    #[error(
        "serving it would take the in-memory indexes of the served catalogs to {total} bytes, more than --max-served-index-bytes ({max}): its index of {lines} lines (blobs) takes {needed} bytes; the last good content stays served"
    )]
    IndexBudget {
        /// Lines of the new content.
        lines: usize,
        /// Its index's bytes.
        needed: u64,
        /// All indexes' bytes with it.
        total: u64,
        /// The budget.
        max: u64,
    },
    /// Stored files are not what the store writes (edited or damaged on disk).
    #[error("corrupt content store at {}: {message}", path.display())]
    Corrupt {
        /// Where.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl StoreError {
    fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
        move |source| StoreError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// True when a file or directory was missing: what a read racing a put or delete sees.
    fn is_not_found(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What is stored for a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// sha256 (hex) of `all.json`: the Catalog's `status.contentHash` and the HTTP ETag.
    pub hash: String,
    /// Size of `all.json` in bytes (for `catalogd_catalog_content_bytes`).
    pub size: u64,
    /// When this content was first stored (mtime of its `all.json`); putting the same content
    /// again does not change it.
    pub last_modified: SystemTime,
}

/// Which file of the content to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `all.json`.
    Identity,
    /// `all.json.gz`.
    Gzip,
}

/// An opened content file. The open handle keeps the bytes readable even if a concurrent put
/// replaces the content and removes its directory.
#[derive(Debug)]
pub struct Opened {
    /// What the file belongs to.
    pub stored: Stored,
    /// Which file was opened: identity when gzip was asked for but `all.json.gz` is still
    /// being made.
    pub encoding: Encoding,
    /// The open file.
    pub file: File,
    /// Its length in bytes.
    pub len: u64,
}

/// The content store. See the module documentation.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    /// Per-catalog locks serializing puts, deletes and gzip publications of one catalog.
    locks: Arc<Locks>,
    compressor: compressor::Compressor,
    /// The index of each catalog's current content, keyed by catalog, with its hash: built
    /// by the put, or by reading all.json once.
    indexes: Mutex<HashMap<String, (String, Arc<Index>)>>,
    /// The most memory the indexes of served catalogs may hold together.
    max_index_bytes: u64,
    /// Bumped whenever a catalog's current content changes (put or delete), so that readers
    /// who follow content (the aggregated API's watches) wake without polling.
    changes: tokio::sync::watch::Sender<u64>,
}

impl Store {
    /// Opens (creating it if needed) the store at `root`, and removes what a crash may have
    /// left: temporary directories and links, and hash directories `current` does not name.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        Self::open_with_index_budget(root, u64::MAX)
    }

    /// [`Store::open`], with the indexes of served catalogs held to `max_index_bytes` in all:
    /// the index of every stored catalog is loaded at once (so the accounting is complete), and
    /// new content whose index would not fit is refused ([`StoreError::IndexBudget`]).
    pub fn open_with_index_budget(
        root: impl Into<PathBuf>,
        max_index_bytes: u64,
    ) -> Result<Store, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(StoreError::io("create", &root))?;
        let locks = Arc::new(Locks::default());
        let store = Store {
            compressor: compressor::Compressor::start(root.clone(), locks.clone(), GZIP_LEVEL),
            root,
            locks,
            indexes: Mutex::default(),
            max_index_bytes,
            changes: tokio::sync::watch::Sender::new(0),
        };
        store.clean_leftovers()?;
        // Content stored before a crash or an upgrade may lack its gzip.
        for catalog in store.list()? {
            if let Ok(Some(hash)) = read_current_hash(&store.root.join(&catalog)) {
                store.compressor.enqueue(&catalog, &hash);
            }
            if max_index_bytes != u64::MAX {
                // Counted from the start (what is unreadable is reported when it is served).
                let _ = store.index(&catalog);
            }
        }
        Ok(store)
    }

    /// The bytes the indexes of served catalogs hold.
    pub fn index_bytes(&self) -> u64 {
        self.lock_indexes()
            .values()
            .map(|(_, index)| index.memory_bytes())
            .sum()
    }

    /// Refuses `index` for `catalog` when, with the other catalogs' indexes, it would not fit
    /// the budget.
    fn check_index_budget(&self, catalog: &str, index: &Index) -> Result<(), StoreError> {
        let others: u64 = self
            .lock_indexes()
            .iter()
            .filter(|(name, _)| name.as_str() != catalog)
            .map(|(_, (_, i))| i.memory_bytes())
            .sum();
        let needed = index.memory_bytes();
        let total = others.saturating_add(needed);
        if total > self.max_index_bytes {
            return Err(StoreError::IndexBudget {
                lines: index.len(),
                needed,
                total,
                max: self.max_index_bytes,
            });
        }
        Ok(())
    }

    /// A receiver that sees a new value whenever a catalog's current content changes.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The storage root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores `fbc` as the catalog's current content, owned by the Catalog with uid `owner`.
    /// See [`Store::put_rendered`].
    pub fn put(&self, catalog: &str, owner: &str, fbc: &Fbc) -> Result<Stored, StoreError> {
        validate_catalog_name(catalog)?;
        self.put_rendered(catalog, owner, Rendered::from_fbc(fbc)?)
    }

    /// Stores `rendered` as the catalog's current content, owned by the Catalog with uid
    /// `owner`: writes it beside the current one, swaps `current` atomically, then removes the
    /// old content. Until the swap, readers get the old content; if anything fails before it,
    /// the old content stays current. Storing the content already current (for the same owner)
    /// only checks that it is there.
    pub fn put_rendered(
        &self,
        catalog: &str,
        owner: &str,
        rendered: Rendered,
    ) -> Result<Stored, StoreError> {
        validate_catalog_name(catalog)?;
        let lock = self.catalog_lock(catalog);
        let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);

        let catalog_dir = self.root.join(catalog);
        let hash = rendered.hash().to_owned();
        let hash_dir = catalog_dir.join(&hash);
        // A `current` that is not ours to read is about to be replaced anyway.
        let current = match read_current_hash(&catalog_dir) {
            Err(StoreError::Corrupt { .. }) => None,
            other => other?,
        };
        let same_owner = read_owner(&hash_dir)?.as_deref() == Some(owner);
        if current.as_deref() == Some(hash.as_str()) && same_owner {
            match stat_stored(&hash_dir, &hash) {
                Ok(stored) => {
                    self.cache_index(catalog, &hash, rendered.into_index());
                    return Ok(stored);
                }
                // `current` names a missing directory: rewrite it below.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }

        self.check_index_budget(catalog, rendered.index())?;
        fs::create_dir_all(&catalog_dir).map_err(StoreError::io("create", &catalog_dir))?;
        // A hash directory is only ever renamed into place once complete and synced, so one
        // that exists (left by a crash between rename and swap) can be used as it is, if it is
        // this owner's. Another owner's (the Catalog was deleted and created again) is not.
        if hash_dir.is_dir() && !same_owner {
            if current.as_deref() == Some(hash.as_str()) {
                remove_path(&catalog_dir.join(CURRENT))?;
            }
            remove_path(&hash_dir)?;
        }
        if !hash_dir.is_dir() {
            let tmp = catalog_dir.join(format!("{TMP_PREFIX}{}", unique_suffix()));
            if let Err(e) = write_content(&tmp, &rendered, owner) {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
            if let Err(e) = fs::rename(&tmp, &hash_dir) {
                let _ = fs::remove_dir_all(&tmp);
                return Err(StoreError::io("rename", &tmp)(e));
            }
        }
        let link_tmp = catalog_dir.join(format!("{TMP_PREFIX}link-{}", unique_suffix()));
        symlink(&hash, &link_tmp).map_err(StoreError::io("symlink", &link_tmp))?;
        let current = catalog_dir.join(CURRENT);
        if let Err(e) = fs::rename(&link_tmp, &current) {
            let _ = fs::remove_file(&link_tmp);
            return Err(StoreError::io("rename", &current)(e));
        }
        sync_dir(&catalog_dir)?;
        let stored = stat_stored(&hash_dir, &hash)?;
        self.cache_index(catalog, &hash, rendered.into_index());
        self.changed();
        // The new content is live: failing to remove the old one must not fail the put.
        remove_all_but(&catalog_dir, &[CURRENT, &hash]);
        self.compressor.enqueue(catalog, &hash);
        Ok(stored)
    }

    /// Waits until the gzip of every content stored so far is written (tests and benchmarks;
    /// the server does not need it).
    pub fn flush(&self) {
        self.compressor.flush();
    }

    fn cache_index(&self, catalog: &str, hash: &str, index: Index) {
        self.lock_indexes()
            .insert(catalog.to_owned(), (hash.to_owned(), Arc::new(index)));
    }

    /// The uid of the Catalog the catalog's current content belongs to; `None` when there is
    /// no content, or it was stored without an owner (by an older catalogd).
    pub fn owner(&self, catalog: &str) -> Result<Option<String>, StoreError> {
        validate_catalog_name(catalog)?;
        Ok(self.resolve(catalog, |dir, _| read_owner(dir))?.flatten())
    }

    /// The catalog's current content, if any.
    pub fn current(&self, catalog: &str) -> Result<Option<Stored>, StoreError> {
        validate_catalog_name(catalog)?;
        self.resolve(catalog, stat_stored)
    }

    /// Opens the catalog's current `all.json` or `all.json.gz`, if it has content.
    pub fn open_content(
        &self,
        catalog: &str,
        encoding: Encoding,
    ) -> Result<Option<Opened>, StoreError> {
        validate_catalog_name(catalog)?;
        self.resolve(catalog, |dir, hash| open_in(dir, hash, encoding))
    }

    /// Opens the catalog's current `all.json` with its metas index, if it has content.
    pub fn open_with_index(
        &self,
        catalog: &str,
    ) -> Result<Option<(Opened, Arc<Index>)>, StoreError> {
        validate_catalog_name(catalog)?;
        self.resolve(catalog, |dir, hash| {
            let opened = open_in(dir, hash, Encoding::Identity)?;
            let index = self.load_index(catalog, dir, hash, opened.len)?;
            Ok((opened, index))
        })
    }

    /// The metas index of the catalog's current content, if it has content.
    pub fn index(&self, catalog: &str) -> Result<Option<(Stored, Arc<Index>)>, StoreError> {
        validate_catalog_name(catalog)?;
        self.resolve(catalog, |dir, hash| {
            let stored = stat_stored(dir, hash)?;
            let index = self.load_index(catalog, dir, hash, stored.size)?;
            Ok((stored, index))
        })
    }

    /// Removes everything stored for the catalog. Readers see it gone at once: the directory
    /// is renamed away before it is removed.
    pub fn delete(&self, catalog: &str) -> Result<(), StoreError> {
        validate_catalog_name(catalog)?;
        let lock = self.catalog_lock(catalog);
        let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.lock_indexes().remove(catalog);
        let catalog_dir = self.root.join(catalog);
        let doomed = self
            .root
            .join(format!("{TMP_PREFIX}deleted-{}", unique_suffix()));
        match fs::rename(&catalog_dir, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io("rename", &catalog_dir)(e)),
        }
        self.changed();
        sync_dir(&self.root)?;
        fs::remove_dir_all(&doomed).map_err(StoreError::io("remove", &doomed))
    }

    /// The catalogs that have content, sorted.
    pub fn list(&self) -> Result<Vec<String>, StoreError> {
        let mut names = Vec::new();
        let entries = fs::read_dir(&self.root).map_err(StoreError::io("read", &self.root))?;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("read", &self.root))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            // Whatever `current` points at, the catalog has something to serve or delete.
            if validate_catalog_name(&name).is_ok()
                && fs::symlink_metadata(entry.path().join(CURRENT)).is_ok()
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn catalog_lock(&self, catalog: &str) -> Arc<Mutex<()>> {
        self.locks.get(catalog)
    }

    fn lock_indexes(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Arc<Index>)>> {
        self.indexes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the directory `current` names, re-resolving `current` when the directory
    /// vanished under it (a concurrent put swapped and removed it). `None` when the catalog
    /// has no content.
    fn resolve<T>(
        &self,
        catalog: &str,
        f: impl Fn(&Path, &str) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let catalog_dir = self.root.join(catalog);
        let mut attempt = 0;
        loop {
            let Some(hash) = read_current_hash(&catalog_dir)? else {
                return Ok(None);
            };
            match f(&catalog_dir.join(&hash), &hash) {
                Err(e) if e.is_not_found() && attempt + 1 < RESOLVE_ATTEMPTS => attempt += 1,
                other => return other.map(Some),
            }
        }
    }

    fn load_index(
        &self,
        catalog: &str,
        dir: &Path,
        hash: &str,
        size: u64,
    ) -> Result<Arc<Index>, StoreError> {
        if let Some((h, index)) = self.lock_indexes().get(catalog)
            && h == hash
        {
            return Ok(index.clone());
        }
        // Built outside the lock: two racing loads just do the work twice.
        let path = dir.join(ALL_JSON);
        let file = File::open(&path).map_err(StoreError::io("open", &path))?;
        let index = Index::read(BufReader::with_capacity(1 << 18, file))
            .map_err(StoreError::io("index", &path))?;
        if index.size() != size {
            return Err(StoreError::Corrupt {
                path,
                message: format!("read {} bytes but the file has {size}", index.size()),
            });
        }
        let index = Arc::new(index);
        self.lock_indexes()
            .insert(catalog.to_owned(), (hash.to_owned(), index.clone()));
        Ok(index)
    }

    fn clean_leftovers(&self) -> Result<(), StoreError> {
        let entries = fs::read_dir(&self.root).map_err(StoreError::io("read", &self.root))?;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("read", &self.root))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = entry.path();
            if name.starts_with(TMP_PREFIX) {
                remove_path(&path)?;
            } else if validate_catalog_name(name).is_ok() && path.is_dir() {
                self.clean_catalog_dir(&path)?;
            }
            // Anything else (lost+found on a volume, say) is not ours: leave it.
        }
        Ok(())
    }

    fn clean_catalog_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let current = match read_current_hash(dir) {
            // Not something the store wrote: drop it, the controller will store the content
            // again.
            Err(error @ StoreError::Corrupt { .. }) => {
                tracing::warn!(%error, "removing a content link the store did not write");
                remove_path(&dir.join(CURRENT))?;
                None
            }
            // Dangling (its content was removed by hand): nothing to serve.
            Ok(Some(hash)) if !dir.join(&hash).join(ALL_JSON).is_file() => {
                tracing::warn!(dir = %dir.display(), %hash, "removing a dangling content link");
                remove_path(&dir.join(CURRENT))?;
                None
            }
            other => other?,
        };
        let entries = fs::read_dir(dir).map_err(StoreError::io("read", dir))?;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("read", dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let ours = name.starts_with(TMP_PREFIX) || is_hash(name);
            if ours && current.as_deref() != Some(name) {
                remove_path(&entry.path())?;
            }
        }
        match &current {
            // A gzip that was being written when catalogd stopped (and the index file of
            // older versions, now built in memory).
            Some(hash) => {
                for leftover in [compressor::GZ_TMP, "index.json"] {
                    remove_path(&dir.join(hash).join(leftover))?;
                }
            }
            // Nothing is served from it: drop it if that left it empty.
            None => {
                let _ = fs::remove_dir(dir);
            }
        }
        Ok(())
    }
}

/// Per-catalog locks.
#[derive(Debug, Default)]
pub(crate) struct Locks(Mutex<HashMap<String, Arc<Mutex<()>>>>);

impl Locks {
    pub(crate) fn get(&self, catalog: &str) -> Arc<Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(catalog.to_owned()).or_default().clone()
    }
}

/// Checks that `name` is a DNS-1123 subdomain (a Kubernetes object name): at most 253
/// characters of lowercase alphanumerics, `-` and `.`, each dot-separated label starting and
/// ending with an alphanumeric. This is what keeps names from escaping the storage root.
pub fn validate_catalog_name(name: &str) -> Result<(), StoreError> {
    // The one check the FBC validator uses too.
    match olm_resolver::names::dns1123_subdomain_problem(name) {
        Some(reason) => Err(StoreError::InvalidName {
            name: name.to_owned(),
            reason: reason.to_owned(),
        }),
        None => Ok(()),
    }
}

fn is_hash(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The hash `current` names, or `None` when there is no `current` (or no catalog directory).
fn read_current_hash(catalog_dir: &Path) -> Result<Option<String>, StoreError> {
    let link = catalog_dir.join(CURRENT);
    match fs::read_link(&link) {
        Ok(target) => match target.to_str() {
            Some(hash) if is_hash(hash) => Ok(Some(hash.to_owned())),
            _ => Err(StoreError::Corrupt {
                path: link,
                message: format!("points at {}, not a content hash", target.display()),
            }),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read link", &link)(e)),
    }
}

fn stat_stored(hash_dir: &Path, hash: &str) -> Result<Stored, StoreError> {
    let path = hash_dir.join(ALL_JSON);
    let meta = fs::metadata(&path).map_err(StoreError::io("stat", &path))?;
    Ok(Stored {
        hash: hash.to_owned(),
        size: meta.len(),
        last_modified: meta.modified().map_err(StoreError::io("stat", &path))?,
    })
}

fn open_in(hash_dir: &Path, hash: &str, encoding: Encoding) -> Result<Opened, StoreError> {
    let stored = stat_stored(hash_dir, hash)?;
    let open = |encoding: Encoding| {
        let path = hash_dir.join(match encoding {
            Encoding::Identity => ALL_JSON,
            Encoding::Gzip => ALL_JSON_GZ,
        });
        File::open(&path).map_err(StoreError::io("open", &path))
    };
    let (file, encoding) = match open(encoding) {
        // The gzip is still being made: the identity body will do.
        Err(e) if e.is_not_found() && encoding == Encoding::Gzip => {
            (open(Encoding::Identity)?, Encoding::Identity)
        }
        other => (other?, encoding),
    };
    let len = file
        .metadata()
        .map_err(|e| StoreError::Io {
            op: "stat",
            path: hash_dir.to_path_buf(),
            source: e,
        })?
        .len();
    Ok(Opened {
        stored,
        encoding,
        file,
        len,
    })
}

/// Writes all.json and the owner into a new directory `dir` and syncs them and it (the gzip
/// comes later, see [`compressor`]).
fn write_content(dir: &Path, rendered: &Rendered, owner: &str) -> Result<(), StoreError> {
    fs::create_dir(dir).map_err(StoreError::io("create", dir))?;
    write_file(&dir.join(ALL_JSON), rendered.bytes())?;
    write_file(&dir.join(OWNER), owner.as_bytes())?;
    sync_dir(dir)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = File::create_new(path).map_err(StoreError::io("create", path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(StoreError::io("write", path))
}

/// The owner recorded in a hash directory, if any.
fn read_owner(hash_dir: &Path) -> Result<Option<String>, StoreError> {
    let path = hash_dir.join(OWNER);
    match fs::read_to_string(&path) {
        Ok(owner) => Ok(Some(owner.trim().to_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path)(e)),
    }
}

/// Makes renames and creations inside `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("sync", dir))
}

fn remove_path(path: &Path) -> Result<(), StoreError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("stat", path)(e)),
    };
    let result = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match result {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StoreError::io("remove", path)(e)),
        _ => Ok(()),
    }
}

/// Removes every entry of `dir` not named in `keep`, logging failures (best effort).
fn remove_all_but(dir: &Path, keep: &[&str]) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot list old content");
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if keep.iter().any(|k| name.to_str() == Some(k)) {
            continue;
        }
        if let Err(e) = remove_path(&entry.path()) {
            tracing::warn!(error = %e, "cannot remove old content");
        }
    }
}

/// A name unique within this host for temporary files: pid, time and a counter.
fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos:x}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_are_dns1123_subdomains() {
        for ok in [
            "a",
            "operatorhubio",
            "my-catalog.v1",
            "0abc",
            &"a".repeat(253),
        ] {
            assert!(validate_catalog_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../etc",
            "a/b",
            "A",
            "-a",
            "a-",
            "a..b",
            "a-.b",
            ".tmp-x",
            "current_",
            "a b",
            &"a".repeat(254),
        ] {
            assert!(validate_catalog_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hashes_are_64_lowercase_hex() {
        assert!(is_hash(&"0f".repeat(32)));
        assert!(!is_hash(&"0F".repeat(32)));
        assert!(!is_hash("current"));
    }
}
