//! `all.json.gz` is made in the background, once the content is live: gzip at the store's level
//! costs several times what parsing, validating and writing the content do, and nothing needs
//! to wait for it. Until it is there the server answers gzip requests with the identity body
//! (always acceptable to a client that asks for gzip). One worker thread compresses one
//! catalog at a time, on every core (see [`super::gzip`]), reading the file chunk by chunk.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::{ALL_JSON, ALL_JSON_GZ, Locks, StoreError, gzip, sync_dir};

/// Name of the gzip being written, inside the hash directory.
pub(crate) const GZ_TMP: &str = "all.json.gz.tmp";

#[derive(Debug, Default)]
struct State {
    /// (catalog, hash) to compress, oldest first.
    queue: VecDeque<(String, String)>,
    busy: bool,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    root: PathBuf,
    locks: Arc<Locks>,
    level: u32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The background compressor of a store.
#[derive(Debug)]
pub(crate) struct Compressor {
    shared: Arc<Shared>,
}

impl Compressor {
    /// Starts the worker.
    pub(crate) fn start(root: PathBuf, locks: Arc<Locks>, level: u32) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            changed: Condvar::new(),
            root,
            locks,
            level,
        });
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("store-compressor".into())
            .spawn(move || run(&worker));
        if let Err(e) = spawned {
            // Without the worker, gzip requests get the identity body: slower, still correct.
            tracing::error!(error = %e, "cannot start the gzip worker; serving uncompressed content");
        }
        Self { shared }
    }

    /// Asks for the gzip of `catalog`'s content `hash` (a newer request for the same catalog
    /// replaces an older one still waiting).
    pub(crate) fn enqueue(&self, catalog: &str, hash: &str) {
        let mut state = self.shared.lock();
        state.queue.retain(|(c, _)| c != catalog);
        state.queue.push_back((catalog.to_owned(), hash.to_owned()));
        self.shared.changed.notify_all();
    }

    /// Waits until every requested gzip is written (or has failed).
    pub(crate) fn flush(&self) {
        let mut state = self.shared.lock();
        while state.busy || !state.queue.is_empty() {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Compressor {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
    }
}

fn run(shared: &Shared) {
    loop {
        let (catalog, hash) = {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                if let Some(job) = state.queue.pop_front() {
                    state.busy = true;
                    break job;
                }
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let started = std::time::Instant::now();
        match compress(shared, &catalog, &hash) {
            Ok(true) => {
                tracing::debug!(%catalog, %hash, elapsed = ?started.elapsed(), "wrote all.json.gz")
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%catalog, %hash, %error, "cannot write all.json.gz; gzip requests get the identity body")
            }
        }
        let mut state = shared.lock();
        state.busy = false;
        shared.changed.notify_all();
    }
}

/// Writes `<catalog>/<hash>/all.json.gz`; false when there was nothing to do (already there,
/// or the content was replaced or deleted meanwhile).
fn compress(shared: &Shared, catalog: &str, hash: &str) -> Result<bool, StoreError> {
    let dir = shared.root.join(catalog).join(hash);
    let all = dir.join(ALL_JSON);
    if dir.join(ALL_JSON_GZ).exists() {
        return Ok(false);
    }
    let file = match File::open(&all) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io("open", &all)(e)),
    };
    let len = file.metadata().map_err(StoreError::io("stat", &all))?.len();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let gz = gzip::compress_file(&file, len, shared.level, threads)
        .map_err(StoreError::io("compress", &all))?;
    // Published under the catalog's lock, so a put or delete cannot remove the directory
    // half way.
    let lock = shared.locks.get(catalog);
    let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    if !dir.is_dir() {
        return Ok(false);
    }
    publish(&dir, &gz)?;
    Ok(true)
}

fn publish(dir: &Path, gz: &[u8]) -> Result<(), StoreError> {
    let tmp = dir.join(GZ_TMP);
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(gz).and_then(|()| f.sync_all()))
        .map_err(StoreError::io("write", &tmp));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    let target = dir.join(ALL_JSON_GZ);
    fs::rename(&tmp, &target).map_err(StoreError::io("rename", &tmp))?;
    sync_dir(dir)
}
