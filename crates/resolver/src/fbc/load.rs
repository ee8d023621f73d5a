//! Reading a catalog from a directory (honouring `.indexignore`), a single file, or in-memory
//! files (e.g. the keys of a ConfigMap).

use std::path::Path;
use std::sync::Arc;

use super::decode::decode;
use super::model::{Fbc, Origin, Problem};

/// Name of the gitignore-style files that exclude paths from a catalog directory.
pub const INDEX_IGNORE: &str = ".indexignore";

/// Loads a catalog from a directory (every regular file below it, in lexical walk order, except
/// those excluded by `.indexignore` files) or from a single file.
pub fn load_path(path: &Path) -> Result<Fbc, Vec<Problem>> {
    let meta = std::fs::metadata(path).map_err(|e| vec![io_problem(path, &e)])?;
    if meta.is_file() {
        let bytes = std::fs::read(path).map_err(|e| vec![io_problem(path, &e)])?;
        return load_files([(path.display().to_string(), bytes)]);
    }
    let mut files = Vec::new();
    let mut problems = Vec::new();
    let walk = ignore::WalkBuilder::new(path)
        .standard_filters(false)
        .add_custom_ignore_filename(INDEX_IGNORE)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walk {
        match entry {
            Ok(e)
                if e.file_type().is_some_and(|t| t.is_file()) && e.file_name() != INDEX_IGNORE =>
            {
                match std::fs::read(e.path()) {
                    Ok(bytes) => files.push((e.path().display().to_string(), bytes)),
                    Err(err) => problems.push(io_problem(e.path(), &err)),
                }
            }
            Ok(_) => {}
            Err(err) => problems.push(Problem {
                origin: None,
                message: err.to_string(),
            }),
        }
    }
    match load_files(files) {
        Ok(fbc) if problems.is_empty() => Ok(fbc),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            Err(problems)
        }
    }
}

fn io_problem(path: &Path, err: &std::io::Error) -> Problem {
    Problem {
        origin: None,
        message: format!("{}: {err}", path.display()),
    }
}

/// Loads a catalog from named files, in the order given. Every file that is not valid JSON or
/// YAML, and every blob that does not fit its schema, is reported.
pub fn load_files<N, B>(files: impl IntoIterator<Item = (N, B)>) -> Result<Fbc, Vec<Problem>>
where
    N: Into<String>,
    B: AsRef<[u8]>,
{
    let mut blobs = Vec::new();
    let mut problems = Vec::new();
    for (name, bytes) in files {
        let file: Arc<str> = Arc::from(name.into());
        match decode(bytes.as_ref()) {
            Ok(raw) => blobs.extend(raw.into_iter().map(|r| {
                (
                    r.raw,
                    Origin {
                        file: file.clone(),
                        line: r.line,
                    },
                )
            })),
            Err(e) => problems.push(Problem::at(&Origin { file, line: e.line }, e.message)),
        }
    }
    match Fbc::from_raw(blobs) {
        Ok(fbc) if problems.is_empty() => Ok(fbc),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            Err(problems)
        }
    }
}
