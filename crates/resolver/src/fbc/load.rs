//! Reading a catalog from a directory (honouring `.indexignore`), a single file, or in-memory
//! files (e.g. the keys of a ConfigMap, or the entries of an archive: `.indexignore` files among
//! them apply too).

use std::path::Path;
use std::sync::Arc;

use super::decode::decode_with;
use super::model::{Fbc, Origin, Problem, Problems};

/// Name of the gitignore-style files that exclude paths from a catalog directory.
pub const INDEX_IGNORE: &str = ".indexignore";

/// Loads a catalog from a directory (every regular file below it, in lexical walk order, except
/// those excluded by `.indexignore` files) or from a single file.
pub fn load_path(path: &Path) -> Result<Fbc, Problems> {
    load_path_as(path, Kept::All)
}

/// Loads a catalog as [`load_path`] does, keeping only the model (as [`load_model`]): for
/// validating and resolving, which read neither the blobs' text nor unknown properties.
pub fn load_path_model(path: &Path) -> Result<Fbc, Problems> {
    load_path_as(path, Kept::Model)
}

/// What a load keeps of each blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    All,
    Model,
}

fn load_path_as(path: &Path, kept: Kept) -> Result<Fbc, Problems> {
    let meta = std::fs::metadata(path).map_err(|e| Problems::from(vec![io_problem(path, &e)]))?;
    if meta.is_file() {
        let bytes = std::fs::read(path).map_err(|e| Problems::from(vec![io_problem(path, &e)]))?;
        return load_files_as([(path.display().to_string(), bytes)], kept);
    }
    let mut files = Vec::new();
    let mut problems = Problems::new();
    for file in catalog_files(path)? {
        match std::fs::read(&file) {
            Ok(bytes) => files.push((file.display().to_string(), bytes)),
            Err(err) => problems.push(io_problem(&file, &err)),
        }
    }
    // The walk has applied the `.indexignore` files; the names are full paths, so an
    // `.indexignore` would not be among them anyway.
    match load_files_as(files, kept) {
        Ok(fbc) if problems.is_empty() => Ok(fbc),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            Err(problems)
        }
    }
}

/// The files of a catalog directory in walk order, without those its `.indexignore` files
/// exclude (or the path itself, when it is a file).
pub fn catalog_files(path: &Path) -> Result<Vec<std::path::PathBuf>, Problems> {
    let meta = std::fs::metadata(path).map_err(|e| Problems::from(vec![io_problem(path, &e)]))?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut problems = Problems::new();
    for entry in walk(path) {
        match entry {
            Ok(e)
                if e.file_type().is_some_and(|t| t.is_file()) && e.file_name() != INDEX_IGNORE =>
            {
                files.push(e.into_path());
            }
            Ok(_) => {}
            Err(err) => problems.push(Problem {
                origin: None,
                message: err.to_string(),
            }),
        }
    }
    if problems.is_empty() {
        Ok(files)
    } else {
        Err(problems)
    }
}

fn walk(path: &Path) -> ignore::Walk {
    ignore::WalkBuilder::new(path)
        .standard_filters(false)
        .add_custom_ignore_filename(INDEX_IGNORE)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

fn io_problem(path: &Path, err: &std::io::Error) -> Problem {
    Problem {
        origin: None,
        message: format!("{}: {err}", path.display()),
    }
}

/// Loads a catalog from named files (`dir/file` paths), in the order given. Files excluded by
/// an `.indexignore` among them (gitignore syntax, applying to the files below its directory,
/// as in a catalog directory) are skipped, as are the `.indexignore` files themselves. Every
/// file that is not valid JSON or YAML, and every blob that does not fit its schema, is
/// reported. Each file is dropped as soon as it is decoded, when the caller gives it by value.
pub fn load_files<N, B>(files: impl IntoIterator<Item = (N, B)>) -> Result<Fbc, Problems>
where
    N: Into<String>,
    B: AsRef<[u8]>,
{
    load_files_as(files, Kept::All)
}

fn load_files_as<N, B>(files: impl IntoIterator<Item = (N, B)>, kept: Kept) -> Result<Fbc, Problems>
where
    N: Into<String>,
    B: AsRef<[u8]>,
{
    let files: Vec<(String, B)> = files.into_iter().map(|(n, b)| (n.into(), b)).collect();
    let ignore = IndexIgnore::from_files(&files);
    let mut fbc = Fbc::default();
    if kept == Kept::All {
        fbc.blobs
            .reserve_text(files.iter().map(|(_, b)| b.as_ref().len()).sum());
    }
    let mut problems = Problems::new();
    for (name, bytes) in files {
        if ignore.excludes(&name) {
            continue;
        }
        let file: Arc<str> = Arc::from(name);
        let id = fbc.blobs.add_file(file.clone());
        let decoded = decode_with(bytes.as_ref(), &mut |json, line| match kept {
            Kept::All => fbc.push_json(json, id, line, &mut problems),
            Kept::Model => fbc.push_model_json(json, id, line, &mut problems),
        });
        if let Err(e) = decoded {
            problems.push(Problem::at(&Origin { file, line: e.line }, e.message));
        }
    }
    fbc.blobs.shrink();
    if problems.is_empty() {
        Ok(fbc)
    } else {
        Err(problems)
    }
}

/// Loads the model of one file for resolution, which reads neither the blobs' text nor the
/// properties of types it does not know (`olm.csv.metadata` and the like): neither is kept, so
/// a large catalog costs a fraction of [`load_files`]'s memory. The result cannot be rendered
/// or served. Problems are reported as [`load_files`] reports them.
pub fn load_model(name: &str, bytes: &[u8]) -> Result<Fbc, Problems> {
    let mut fbc = Fbc::default();
    let mut problems = Problems::new();
    let file: Arc<str> = Arc::from(name);
    let id = fbc.blobs.add_file(file.clone());
    let decoded = decode_with(bytes, &mut |json, line| {
        fbc.push_model_json(json, id, line, &mut problems);
    });
    if let Err(e) = decoded {
        problems.push(Problem::at(&Origin { file, line: e.line }, e.message));
    }
    if problems.is_empty() {
        Ok(fbc)
    } else {
        Err(problems)
    }
}

/// Checks the blobs of one file as [`load_files`] would, keeping none of them: every problem is
/// reported, and memory stays that of the file's bytes (for streaming a catalog file by file).
pub fn check_file(name: &str, bytes: &[u8]) -> Problems {
    let mut scratch = Fbc::default();
    let file: Arc<str> = Arc::from(name);
    let id = scratch.blobs.add_file(file.clone());
    let mut problems = Problems::new();
    let decoded = decode_with(bytes, &mut |json, line| {
        scratch.check_json(json, id, line, &mut problems);
    });
    if let Err(e) = decoded {
        problems.push(Problem::at(&Origin { file, line: e.line }, e.message));
    }
    problems
}

/// Checks the blobs of one YAML file already converted (see [`check_file`]).
pub fn check_documents(name: &str, docs: &super::decode::Documents) -> Problems {
    let mut scratch = Fbc::default();
    let id = scratch.blobs.add_file(Arc::from(name));
    let mut problems = Problems::new();
    for (json, line) in docs.iter() {
        scratch.check_json(json, id, line, &mut problems);
    }
    problems
}

/// The `.indexignore` files among in-memory files.
struct IndexIgnore {
    /// (directory prefix with trailing `/`, or "" for the root; its rules)
    rules: Vec<(String, ignore::gitignore::Gitignore)>,
}

impl IndexIgnore {
    fn from_files<B: AsRef<[u8]>>(files: &[(String, B)]) -> Self {
        let mut rules = Vec::new();
        for (name, bytes) in files {
            let (dir, base) = name.rsplit_once('/').unwrap_or(("", name.as_str()));
            if base != INDEX_IGNORE {
                continue;
            }
            let mut builder = ignore::gitignore::GitignoreBuilder::new(format!("/{dir}"));
            for line in String::from_utf8_lossy(bytes.as_ref()).lines() {
                // A malformed pattern is ignored, as `ignore` does when walking a directory.
                let _ = builder.add_line(None, line);
            }
            if let Ok(gitignore) = builder.build() {
                let prefix = if dir.is_empty() {
                    String::new()
                } else {
                    format!("{dir}/")
                };
                rules.push((prefix, gitignore));
            }
        }
        Self { rules }
    }

    /// Whether `name` is an `.indexignore` file or excluded by one above it.
    fn excludes(&self, name: &str) -> bool {
        let base = name.rsplit('/').next().unwrap_or(name);
        if base == INDEX_IGNORE {
            return true;
        }
        self.rules.iter().any(|(prefix, gitignore)| {
            name.starts_with(prefix.as_str())
                && gitignore
                    .matched_path_or_any_parents(format!("/{name}"), false)
                    .is_ignore()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "---\nschema: olm.package\nname: p\ndefaultChannel: s\n---\nschema: olm.channel\npackage: p\nname: s\nentries: [{name: b}]\n---\nschema: olm.bundle\npackage: p\nname: b\nimage: i\nproperties: [{type: olm.package, value: {packageName: p, version: 1.0.0}}]\n";

    #[test]
    fn indexignore_files_among_in_memory_files_apply_below_their_directory() {
        let junk = "not: [a catalog";
        let files = vec![
            ("ns/cm/.indexignore", "*.md\n/sub/skip.yaml\n"),
            ("ns/cm/README.md", junk),
            ("ns/cm/sub/skip.yaml", junk),
            ("ns/cm/sub/.indexignore", "*.txt\n"),
            ("ns/cm/sub/notes.txt", junk),
            ("ns/cm/catalog.yaml", VALID),
        ];
        let fbc = load_files(files.clone()).unwrap();
        assert_eq!(fbc.packages.len(), 1);
        // An .indexignore elsewhere does not apply here.
        let mut other = files;
        other[0].0 = "ns/other/.indexignore";
        let problems = load_files(other).unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.to_string().starts_with("ns/cm/README.md")),
            "{problems:?}"
        );
    }

    #[test]
    fn problems_past_the_listed_ones_are_counted_and_their_blobs_not_kept() {
        let broken = "{}".repeat(Problems::MAX_LISTED * 3);
        let problems = load_files([("c.json", broken)]).unwrap_err();
        assert_eq!(problems.len(), Problems::MAX_LISTED);
        assert_eq!(problems.total(), Problems::MAX_LISTED * 3);
        assert_eq!(problems.omitted(), Problems::MAX_LISTED * 2);
    }
}
