//! The layer cache: blobs on disk, by repository and digest, so that a re-pull of a changed
//! image fetches only the layers that changed, and a layer is streamed to disk rather than held
//! in memory. A blob enters the cache only once its digest and size are verified; the least
//! recently used blobs are dropped past a size limit.
//!
//! A blob is cached for the repository it came from, never for a digest alone: a Catalog must
//! have read the manifest of that repository (with its own credentials, if it needs any)
//! before a cached layer of it is used. Keyed by digest alone, any manifest naming the digest
//! of a private layer (served by a registry of the Catalog author's choosing) would unpack
//! that layer from the cache, without its registry's credentials.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures::{Stream, StreamExt};
use sha2::{Digest as _, Sha256, Sha512};
use tokio::io::AsyncWriteExt;

use super::reference::parse_digest;

/// Why a blob could not be cached.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The bytes do not have the digest they were asked for by.
    #[error("digest mismatch: expected {expected}, got {actual}")]
    Mismatch {
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// More bytes than the descriptor or the limit allows.
    #[error("{0}")]
    TooLarge(String),
    /// Fewer bytes than the descriptor says.
    #[error("truncated: {got} of {expected} bytes")]
    Truncated {
        /// What arrived.
        got: u64,
        /// What the descriptor said.
        expected: u64,
    },
    /// The digest is not a sha256 or sha512 digest.
    #[error("unsupported digest {0:?}")]
    BadDigest(String),
    /// Reading the stream failed.
    #[error("{0}")]
    Stream(String),
    /// Writing the cache failed.
    #[error("writing the layer cache: {0}")]
    Io(#[from] std::io::Error),
}

/// A running digest of either algorithm.
pub enum Hasher {
    /// sha256.
    Sha256(Sha256),
    /// sha512.
    Sha512(Sha512),
}

impl Hasher {
    /// A hasher for `digest`'s algorithm.
    pub fn for_digest(digest: &str) -> Result<Self, BlobError> {
        match parse_digest(digest) {
            Some(("sha256", _)) => Ok(Hasher::Sha256(Sha256::new())),
            Some(("sha512", _)) => Ok(Hasher::Sha512(Sha512::new())),
            _ => Err(BlobError::BadDigest(digest.to_owned())),
        }
    }

    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    /// The digest, as `algorithm:hex`.
    pub fn finish(self) -> String {
        let (algorithm, bytes) = match self {
            Hasher::Sha256(h) => ("sha256", h.finalize().to_vec()),
            Hasher::Sha512(h) => ("sha512", h.finalize().to_vec()),
        };
        format!("{algorithm}:{}", hex::encode(&bytes))
    }
}

/// Reads `stream` into memory, at most `max` bytes, checking `digest` (for small blobs: the
/// image config).
pub async fn read_verified<S>(mut stream: S, digest: &str, max: u64) -> Result<Vec<u8>, BlobError>
where
    S: Stream<Item = std::io::Result<bytes::Bytes>> + Unpin,
{
    let mut hasher = Hasher::for_digest(digest)?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(stream_error)?;
        if body.len() as u64 + chunk.len() as u64 > max {
            return Err(BlobError::TooLarge(format!("larger than {max} bytes")));
        }
        hasher.update(&chunk);
        body.extend_from_slice(&chunk);
    }
    check(hasher, digest)?;
    Ok(body)
}

/// A stream's error (the registry connection's).
fn stream_error(e: std::io::Error) -> BlobError {
    BlobError::Stream(e.to_string())
}

fn check(hasher: Hasher, digest: &str) -> Result<(), BlobError> {
    let actual = hasher.finish();
    if actual != digest {
        return Err(BlobError::Mismatch {
            expected: digest.to_owned(),
            actual,
        });
    }
    Ok(())
}

/// Blobs on disk, by digest.
#[derive(Debug)]
pub struct LayerCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl LayerCache {
    /// The cache in `dir` (created), keeping about `max_bytes`; half-written blobs of an
    /// earlier run are removed.
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> std::io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().ends_with(".partial") {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(Self { dir, max_bytes })
    }

    /// Where the blob `digest` of `repository` (`registry/name`) lives (it may not be there).
    fn path(&self, repository: &str, digest: &str) -> Result<PathBuf, BlobError> {
        let (algorithm, hex) =
            parse_digest(digest).ok_or_else(|| BlobError::BadDigest(digest.to_owned()))?;
        // A repository name may hold '/' and ':': its hash names it on disk.
        let repo = hex::encode(Sha256::digest(repository.as_bytes()));
        Ok(self.dir.join(format!("{}-{algorithm}-{hex}", &repo[..16])))
    }

    /// The cached blob `digest` of `repository`, if any, open (a trim by a concurrent pull may
    /// unlink it, and it stays readable); marks it used.
    pub fn get(&self, repository: &str, digest: &str) -> Option<fs::File> {
        let path = self.path(repository, digest).ok()?;
        let file = fs::File::options()
            .read(true)
            .append(true)
            .open(&path)
            .ok()?;
        // Recency for trimming; a failure only makes the blob look older.
        let _ = file.set_modified(SystemTime::now());
        Some(file)
    }

    /// Streams `stream` into the cache as the blob `digest` of `repository`, checking its
    /// digest and that it has exactly `size` bytes, at most `max`, and returns it open. Nothing
    /// enters the cache unless it verified, and a fill that fails or is cancelled leaves
    /// nothing behind.
    pub async fn fill<S>(
        &self,
        repository: &str,
        digest: &str,
        size: u64,
        max: u64,
        mut stream: S,
    ) -> Result<fs::File, BlobError>
    where
        S: Stream<Item = std::io::Result<bytes::Bytes>> + Unpin,
    {
        let path = self.path(repository, digest)?;
        let mut hasher = Hasher::for_digest(digest)?;
        // Unique per fill: two catalogs may pull the same layer at once.
        let partial = self.dir.join(format!(
            "{}.{}.partial",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id() as u64 * 1_000_000 + u64::from(rand_suffix())
        ));
        // Removes the partial file unless it was renamed into place: also when the pull is
        // cancelled (a timeout drops this future).
        let guard = Partial(Some(partial.clone()));
        let mut file = tokio::fs::File::create(&partial).await?;
        let mut written: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(stream_error)?;
            written += chunk.len() as u64;
            if written > size || written > max {
                return Err(BlobError::TooLarge(format!(
                    "sent more than the {} bytes {}",
                    size.min(max),
                    if written > max {
                        "bytes allowed (--max-content-bytes)"
                    } else {
                        "its descriptor says"
                    }
                )));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await?;
        }
        if written < size {
            return Err(BlobError::Truncated {
                got: written,
                expected: size,
            });
        }
        file.flush().await?;
        file.sync_all().await?;
        drop(file);
        check(hasher, digest)?;
        tokio::fs::rename(&partial, &path).await?;
        guard.disarm();
        Ok(fs::File::open(&path)?)
    }

    /// Drops the least recently used blobs until the cache holds at most its limit, never one
    /// of `keep` (the image just unpacked: the layers `digests` of `repository`).
    pub fn trim(&self, repository: &str, keep: &[String]) -> std::io::Result<u64> {
        let keep: Vec<PathBuf> = keep
            .iter()
            .filter_map(|d| self.path(repository, d).ok())
            .collect();
        let mut blobs: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_file() && !entry.file_name().to_string_lossy().ends_with(".partial") {
                blobs.push((meta.modified()?, meta.len(), entry.path()));
            }
        }
        let mut total: u64 = blobs.iter().map(|(_, len, _)| len).sum();
        blobs.sort();
        let mut removed = 0;
        for (_, len, path) in blobs {
            if total <= self.max_bytes {
                break;
            }
            if keep.contains(&path) {
                continue;
            }
            fs::remove_file(&path)?;
            total -= len;
            removed += 1;
        }
        Ok(removed)
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A partial blob, removed when dropped unless disarmed.
struct Partial(Option<PathBuf>);

impl Partial {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// A few bits that differ between concurrent fills in one process.
fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "registry.example/catalog";

    fn digest(bytes: &[u8]) -> String {
        let mut h = Hasher::for_digest(&format!("sha256:{}", "0".repeat(64))).unwrap();
        h.update(bytes);
        h.finish()
    }

    fn stream(
        chunks: &[&'static [u8]],
    ) -> impl Stream<Item = std::io::Result<bytes::Bytes>> + Unpin {
        futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok(bytes::Bytes::from_static(c)))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn a_verified_blob_is_cached_and_a_mismatch_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = LayerCache::open(dir.path(), 1 << 20).unwrap();
        let d = digest(b"hello world");
        assert!(cache.get(REPO, &d).is_none());
        let mut file = cache
            .fill(REPO, &d, 11, 100, stream(&[b"hello ", b"world"]))
            .await
            .unwrap();
        let mut read = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut read).unwrap();
        assert_eq!(read, b"hello world");
        assert!(cache.get(REPO, &d).is_some());

        let other = digest(b"something else");
        let err = cache
            .fill(REPO, &other, 11, 100, stream(&[b"hello world"]))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Mismatch { .. }), "{err}");
        assert!(cache.get(REPO, &other).is_none());
        // No half-written file stays behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A layer cached for one repository is never served for another, whose manifest merely
    /// names the same digest: that repository's registry must be asked for it.
    #[tokio::test]
    async fn a_blob_is_cached_for_its_repository_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = LayerCache::open(dir.path(), 1 << 20).unwrap();
        let d = digest(b"private layer");
        cache
            .fill(
                "private.example/team/catalog",
                &d,
                13,
                100,
                stream(&[b"private layer"]),
            )
            .await
            .unwrap();
        assert!(cache.get("private.example/team/catalog", &d).is_some());
        for other in [
            "evil.example/team/catalog",
            "private.example/other",
            "private.example/team/catalog2",
        ] {
            assert!(cache.get(other, &d).is_none(), "served to {other}");
        }
    }

    #[tokio::test]
    async fn sizes_are_enforced_while_streaming() {
        let dir = tempfile::tempdir().unwrap();
        let cache = LayerCache::open(dir.path(), 1 << 20).unwrap();
        let d = digest(b"0123456789");
        let err = cache
            .fill(REPO, &d, 10, 5, stream(&[b"0123", b"456789"]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("--max-content-bytes"), "{err}");
        let err = cache
            .fill(REPO, &d, 4, 100, stream(&[b"0123456789"]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("descriptor"), "{err}");
        let err = cache
            .fill(REPO, &d, 20, 100, stream(&[b"0123456789"]))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                BlobError::Truncated {
                    got: 10,
                    expected: 20
                }
            ),
            "{err}"
        );
        assert!(
            cache
                .fill(REPO, "sha256:../x", 1, 1, stream(&[]))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn trimming_drops_the_least_recently_used_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = LayerCache::open(dir.path(), 25).unwrap();
        let blobs: [&'static [u8]; 3] = [b"aaaaaaaaaa", b"bbbbbbbbbb", b"cccccccccc"];
        let mut digests = Vec::new();
        for (i, b) in blobs.iter().enumerate() {
            let d = digest(b);
            cache.fill(REPO, &d, 10, 100, stream(&[b])).await.unwrap();
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64);
            fs::File::options()
                .append(true)
                .open(cache.path(REPO, &d).unwrap())
                .unwrap()
                .set_modified(when)
                .unwrap();
            digests.push(d);
        }
        // The oldest is kept because it is in use; the next oldest goes.
        assert_eq!(cache.trim(REPO, &digests[..1]).unwrap(), 1);
        assert!(cache.path(REPO, &digests[0]).unwrap().exists());
        assert!(!cache.path(REPO, &digests[1]).unwrap().exists());
        assert!(cache.path(REPO, &digests[2]).unwrap().exists());
    }
}
