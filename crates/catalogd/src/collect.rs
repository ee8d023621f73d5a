//! `catalogd collect`: the collector container of a custom source's generator Pod. It checks
//! the file the generator wrote (a regular file, not a link; within the size limit), computes
//! its sha256 and uploads it to catalogd with the Pod's one-time token. Whatever goes wrong is
//! written to the termination log as `Reason: message`, which catalogd reads back into the
//! Catalog's condition.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::source::custom::pod::TOKEN_ENV;
use crate::source::custom::upload::SHA256_HEADER;
use crate::source::custom::verdict::reasons;

/// The collector's arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "catalogd collect",
    about = "Upload a generator's output to catalogd"
)]
pub struct CollectArgs {
    /// The file the generator wrote.
    #[arg(long)]
    pub file: PathBuf,
    /// Where to upload it (`<upload URL>/uploads/<pod>`).
    #[arg(long)]
    pub url: String,
    /// The largest file accepted.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub max_bytes: u64,
    /// Where to write the termination message.
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
    /// How long the upload may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_seconds: u64,
}

/// Why the collector failed: a reason catalogd knows, a message, an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The reason (the termination message's prefix).
    pub reason: &'static str,
    /// What happened.
    pub message: String,
    /// The exit code.
    pub code: i32,
}

/// Runs the collector; returns its exit code, having written the termination message on
/// failure. The token comes from the environment ([`TOKEN_ENV`]).
pub fn run(args: &CollectArgs) -> i32 {
    olm_runtime::install_crypto_provider();
    let token = std::env::var(TOKEN_ENV).unwrap_or_default();
    match collect(args, &token) {
        Ok(bytes) => {
            eprintln!("uploaded {} ({bytes} bytes)", args.file.display());
            0
        }
        Err(f) => {
            let line = format!("{}: {}", f.reason, f.message);
            eprintln!("{line}");
            if let Ok(mut log) = File::create(&args.termination_log) {
                let _ = log.write_all(line.as_bytes());
            }
            f.code
        }
    }
}

/// Checks and uploads the file; the bytes uploaded.
pub fn collect(args: &CollectArgs, token: &str) -> Result<u64, Failure> {
    let fail = |reason, code, message: String| Failure {
        reason,
        message,
        code,
    };
    let shown = args.file.display();
    // A link could point anywhere in the collector's own filesystem: only a regular file, on a
    // path without links (the generator has exited, so nothing changes the volume now).
    let linked_parent = args
        .file
        .parent()
        .is_some_and(|p| std::fs::canonicalize(p).is_ok_and(|c| c != p));
    if linked_parent {
        return Err(fail(
            reasons::OUTPUT_MISSING,
            2,
            format!("a directory on the way to {shown} is a link; write the catalog itself there"),
        ));
    }
    let meta = match std::fs::symlink_metadata(&args.file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fail(
                reasons::OUTPUT_MISSING,
                2,
                format!("the generator wrote no file at {shown}"),
            ));
        }
        Err(e) => return Err(fail(reasons::OUTPUT_MISSING, 2, format!("{shown}: {e}"))),
    };
    if !meta.file_type().is_file() {
        return Err(fail(
            reasons::OUTPUT_MISSING,
            2,
            format!(
                "{shown} is not a regular file (a link or a directory); write the catalog itself there"
            ),
        ));
    }
    if meta.len() > args.max_bytes {
        return Err(fail(
            crate::source::reasons::CONTENT_TOO_LARGE,
            3,
            format!(
                "{shown} holds {} bytes, more than the {} catalogd accepts (--max-content-bytes)",
                meta.len(),
                args.max_bytes
            ),
        ));
    }
    if token.is_empty() {
        return Err(fail(
            reasons::COLLECT_FAILED,
            5,
            format!("{TOKEN_ENV} is not set"),
        ));
    }
    // One open file for the hash and the upload: what is hashed is what is sent.
    let mut file = File::open(&args.file)
        .map_err(|e| fail(reasons::COLLECT_FAILED, 5, format!("opening {shown}: {e}")))?;
    let sha256 = digest(&mut file)
        .and_then(|d| file.seek(SeekFrom::Start(0)).map(|_| d))
        .map_err(|e| fail(reasons::COLLECT_FAILED, 5, format!("reading {shown}: {e}")))?;
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(args.timeout_seconds))
        .build()
        .map_err(|e| {
            fail(
                reasons::COLLECT_FAILED,
                5,
                format!("building the HTTP client: {e}"),
            )
        })?;
    let response = client
        .put(&args.url)
        .bearer_auth(token)
        .header(SHA256_HEADER, &sha256)
        .body(reqwest::blocking::Body::sized(file, meta.len()))
        .send()
        .map_err(|e| {
            fail(
                reasons::COLLECT_FAILED,
                5,
                format!("uploading to {}: {e}", args.url),
            )
        })?;
    let status = response.status();
    if status.is_success() {
        return Ok(meta.len());
    }
    let body = response.text().unwrap_or_default();
    let reason = if status.as_u16() == 413 {
        crate::source::reasons::CONTENT_TOO_LARGE
    } else {
        reasons::UPLOAD_REJECTED
    };
    Err(fail(
        reason,
        4,
        format!(
            "catalogd answered HTTP {}: {}",
            status.as_u16(),
            body.trim()
        ),
    ))
}

fn digest(file: &mut File) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &std::path::Path, file: &str, max: u64) -> CollectArgs {
        CollectArgs {
            file: dir.join(file),
            url: "http://127.0.0.1:9/uploads/p".into(),
            max_bytes: max,
            termination_log: dir.join("termination-log"),
            timeout_seconds: 5,
        }
    }

    #[test]
    fn a_missing_linked_or_oversized_output_is_refused_before_any_upload() {
        let dir = tempfile::tempdir().unwrap();
        let err = collect(&args(dir.path(), "catalog.json", 10), "t").unwrap_err();
        assert_eq!((err.reason, err.code), (reasons::OUTPUT_MISSING, 2));
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link.json")).unwrap();
        let err = collect(&args(dir.path(), "link.json", 10), "t").unwrap_err();
        assert!(err.message.contains("not a regular file"), "{err:?}");
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        let err = collect(&args(dir.path(), "etc/hostname", 10), "t").unwrap_err();
        assert!(err.message.contains("is a link"), "{err:?}");
        std::fs::write(dir.path().join("big.json"), [b' '; 11]).unwrap();
        let err = collect(&args(dir.path(), "big.json", 10), "t").unwrap_err();
        assert_eq!(err.reason, crate::source::reasons::CONTENT_TOO_LARGE);
        let err = collect(&args(dir.path(), "big.json", 100), "").unwrap_err();
        assert!(err.message.contains(TOKEN_ENV));
    }

    #[test]
    fn failures_are_written_to_the_termination_log_with_their_reason() {
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path(), "catalog.json", 10);
        assert_eq!(run(&a), 2);
        let log = std::fs::read_to_string(dir.path().join("termination-log")).unwrap();
        assert!(
            log.starts_with("OutputMissing: the generator wrote no file at "),
            "{log}"
        );
    }
}
