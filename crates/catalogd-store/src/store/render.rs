//! The CPU part of storing content: rendering it in canonical form, hashing it, and indexing
//! its lines, on two threads for large catalogs.

use olm_resolver::fbc::Fbc;
use olm_resolver::fbc::model::render_blob;
use sha2::{Digest, Sha256};

use super::{Index, IndexBuilder, StoreError};

/// Content at least this large is rendered on two threads.
const PARALLEL_RENDER_BYTES: usize = 4 << 20;

/// Content rendered in canonical form with its index, ready to store. Building it is the CPU
/// part of a put (render + sha256), so callers can do it first, e.g. to compare the hash with
/// the one already served.
#[derive(Debug)]
pub struct Rendered {
    bytes: Vec<u8>,
    index: Index,
    hash: String,
}

impl Rendered {
    /// Renders every blob of `fbc` (byte-equal to [`Fbc::render`]). Large catalogs are
    /// rendered in two halves on two threads, the first half hashed while the second renders.
    pub fn from_fbc(fbc: &Fbc) -> Result<Self, StoreError> {
        let blobs = &fbc.blobs;
        let parallel = std::thread::available_parallelism().map_or(1, usize::from) > 1
            && blobs.text_len() >= PARALLEL_RENDER_BYTES;
        // Split where half the text is, not half the blobs: blob sizes vary a lot.
        let split = if parallel {
            let half = blobs.text_len() / 2;
            let mut seen = 0;
            blobs
                .iter()
                .position(|b| {
                    seen += b.raw.len();
                    seen >= half
                })
                .map_or(blobs.len(), |i| i + 1)
        } else {
            blobs.len()
        };
        let estimate = |from: usize, to: usize| -> usize {
            blobs
                .iter()
                .skip(from)
                .take(to - from)
                .map(|b| b.raw.len() + 1)
                .sum()
        };
        // The first half's buffer has room for the whole rendering (canonical JSON is about
        // the size of the text read), so appending the second half does not copy the first.
        let render = |from: usize, to: usize, capacity: usize| {
            let mut bytes = Vec::with_capacity(capacity);
            let mut lengths: Vec<u32> = Vec::with_capacity(to - from);
            for blob in blobs.iter().skip(from).take(to - from) {
                let start = bytes.len();
                render_blob(blob.raw, &mut bytes);
                lengths.push(u32::try_from(bytes.len() - start).unwrap_or(u32::MAX));
            }
            (bytes, lengths)
        };
        let total = estimate(0, blobs.len());
        let ((mut bytes, mut lengths, hasher), (rest, rest_lengths)) = std::thread::scope(|s| {
            let second = (split < blobs.len())
                .then(|| s.spawn(|| render(split, blobs.len(), estimate(split, blobs.len()))));
            let (bytes, lengths) = render(0, split, total);
            let mut hasher = Sha256::new();
            hasher.update(&bytes);
            let rest = match second.map(|h| h.join()) {
                Some(Ok(rest)) => rest,
                // The second thread panicked (it cannot): render its half here.
                Some(Err(_)) => render(split, blobs.len(), 0),
                None => (Vec::new(), Vec::new()),
            };
            ((bytes, lengths, hasher), rest)
        });
        let mut hasher = hasher;
        hasher.update(&rest);
        bytes.extend_from_slice(&rest);
        drop(rest);
        lengths.extend(rest_lengths);
        let mut index = IndexBuilder::new();
        for (blob, length) in blobs.iter().zip(lengths) {
            index
                .push(blob.schema, blob.package, blob.name, u64::from(length))
                .map_err(|e| StoreError::TooLarge(e.to_string()))?;
        }
        let hash = hex::encode(hasher.finalize());
        Ok(Self {
            bytes,
            index: index.finish(),
            hash,
        })
    }

    /// The canonical JSON lines.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The index of the lines.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The index, for the store to keep (the bytes are written, the index is cached).
    pub(crate) fn into_index(self) -> Index {
        self.index
    }

    /// sha256 (hex) of [`Rendered::bytes`].
    pub fn hash(&self) -> &str {
        &self.hash
    }
}
