//! The CPU- and memory-heavy part of a reconcile: parse and validate fetched files, render and
//! store them. Blocking: run it on a blocking thread, holding a share of the unpack budget.

use olm_resolver::fbc::{Fbc, Problems, load_files, validate::validate};

use crate::status::reasons;
use crate::store::{Store, Stored};

/// How many `file:line: problem` lines an InvalidContent message lists before counting the rest.
const MAX_LISTED_PROBLEMS: usize = 5;

/// Why an unpack failed: a condition reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The `Unpacked` reason.
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
}

/// What was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// The stored content.
    pub stored: Stored,
    /// A sentence on what it holds.
    pub summary: String,
}

/// The sentence of an InvalidContent condition: the first problems, and how many more.
fn describe(problems: &Problems) -> String {
    let mut lines: Vec<String> = problems
        .iter()
        .take(MAX_LISTED_PROBLEMS)
        .map(|p| p.to_string())
        .collect();
    let shown = lines.len();
    if problems.total() > shown {
        lines.push(format!("and {} more problems", problems.total() - shown));
    }
    format!(
        "the content is not a valid File-Based Catalog: {}",
        lines.join("; ")
    )
}

/// Parses and validates fetched files (consumed, each dropped once read); the error lists the
/// first problems as `file:line: problem` and counts the rest.
pub fn parse_and_validate(files: Vec<(String, Vec<u8>)>) -> Result<Fbc, String> {
    if files.is_empty() {
        return Err("the source holds no files".into());
    }
    let fbc = load_files(files).map_err(|p| describe(&p))?;
    let problems = validate(&fbc);
    if !problems.is_empty() {
        return Err(describe(&problems));
    }
    if fbc.packages.is_empty() {
        return Err("the content holds no olm.package".into());
    }
    Ok(fbc)
}

/// Parses, validates and stores `files` as the content of the Catalog `name` with uid `uid`.
pub fn unpack(
    store: &Store,
    name: &str,
    uid: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<Unpacked, Failed> {
    let fbc = parse_and_validate(files).map_err(|message| Failed {
        reason: reasons::INVALID_CONTENT,
        message,
    })?;
    let counts = (fbc.packages.len(), fbc.channels.len(), fbc.bundles.len());
    let stored = store.put(name, uid, &fbc).map_err(|e| match e {
        // Valid content that does not fit what catalogd may hold: as any other limit.
        crate::store::StoreError::IndexBudget { .. } => Failed {
            reason: crate::source::reasons::CONTENT_TOO_LARGE,
            message: format!("the content is valid, but {e}"),
        },
        e => Failed {
            reason: reasons::FAILED_TO_STORE,
            message: format!("failed to store the content: {e}"),
        },
    })?;
    drop(fbc);
    let summary = format!(
        "unpacked {} packages, {} channels and {} bundles; content {}",
        counts.0,
        counts.1,
        counts.2,
        &stored.hash[..stored.hash.len().min(12)]
    );
    Ok(Unpacked { stored, summary })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_content_lists_the_first_problems_with_file_and_line() {
        let bad = b"---\nschema: olm.package\nname: foo\ndefaultChannel: stable\n".to_vec();
        let err = parse_and_validate(vec![("ns/cm/catalog.yaml".into(), bad)]).unwrap_err();
        assert!(
            err.contains("ns/cm/catalog.yaml:2: package \"foo\" must contain at least one channel"),
            "{err}"
        );
        let many: String = (0..8)
            .map(|i| format!("---\nschema: olm.package\nname: p{i}\n"))
            .collect();
        let err = parse_and_validate(vec![("f".into(), many.into_bytes())]).unwrap_err();
        assert!(err.ends_with("and 11 more problems"), "{err}");
        assert!(parse_and_validate(vec![]).is_err());
    }

    #[test]
    fn a_million_broken_blobs_make_a_short_message_with_an_exact_count() {
        let broken = "{}".repeat(1_000_000).into_bytes();
        let err = parse_and_validate(vec![("c.json".into(), broken)]).unwrap_err();
        assert!(err.ends_with("and 999995 more problems"), "{err}");
        assert!(err.len() < 1000, "{} bytes", err.len());
    }
}
