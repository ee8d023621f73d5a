//! The `olm-resolve` command line, as a function from arguments to exit code and output, so
//! tests can call it without a process.
//!
//! * `olm-resolve PROBLEM.yaml`: exit 0 and `{"bundles":[...]}`; exit 1 and
//!   `{"error":"unsatisfiable","explanation":[...]}` (sentences also on stderr); exit 2 and every
//!   error, with file and line, when the problem or a catalog is invalid.
//! * `olm-resolve validate DIR`: exit 0 when valid, 1 with every problem when not.
//! * `olm-resolve render DIR`: the canonical JSON lines on stdout.
//! * `olm-resolve --timings PROBLEM.yaml`: as without the flag, and on stderr the median time
//!   of building the index and of resolving, over 7 runs in the process (for benchmarks).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::fbc::{self, Fbc, Problem, Problems};
use crate::resolve::{self, CatalogInput, Index, Installed, Request, ResolveError};

/// What a run printed and how it ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code: 0 success, 1 unsatisfiable or invalid catalog, 2 bad input.
    pub code: i32,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: String,
}

const USAGE: &str = "usage: olm-resolve [--timings] PROBLEM.yaml | olm-resolve validate DIR | olm-resolve render DIR";

/// How many times `--timings` builds the index and resolves.
const TIMED_RUNS: usize = 7;

/// Runs the command line (without the program name), collecting standard output.
pub fn run(args: &[String]) -> Output {
    let mut stdout = Vec::new();
    let mut out = run_to(args, &mut stdout);
    stdout.extend(std::mem::take(&mut out.stdout));
    out.stdout = stdout;
    out
}

/// Runs the command line, writing `render`'s output to `stdout` as it goes (a catalog is never
/// held whole); other commands' output is in the returned [`Output`].
pub fn run_to(args: &[String], stdout: &mut dyn std::io::Write) -> Output {
    match args {
        [cmd, dir] if cmd == "validate" => validate(Path::new(dir)),
        [cmd, dir] if cmd == "render" => render(Path::new(dir), stdout),
        [flag] if flag == "-h" || flag == "--help" => Output {
            code: 0,
            stdout: format!("{USAGE}\n").into_bytes(),
            ..Default::default()
        },
        [problem] if !problem.starts_with('-') => solve(Path::new(problem), false),
        [flag, problem] if flag == "--timings" => solve(Path::new(problem), true),
        _ => Output {
            code: 2,
            stderr: format!("{USAGE}\n"),
            ..Default::default()
        },
    }
}

fn problems_output(code: i32, problems: &Problems) -> Output {
    let mut stderr = String::new();
    for p in problems {
        stderr.push_str(&p.to_string());
        stderr.push('\n');
    }
    if problems.omitted() > 0 {
        stderr.push_str(&format!(
            "... and {} more problems, not listed\n",
            problems.omitted()
        ));
    }
    Output {
        code,
        stderr,
        ..Default::default()
    }
}

/// Loads and validates a catalog, returning every problem of either step. Only the model is
/// kept (validation and resolution read nothing else), so the result cannot be rendered.
pub fn load_valid(path: &Path) -> Result<Fbc, Problems> {
    let fbc = fbc::load::load_path_model(path)?;
    let problems = fbc::validate::validate(&fbc);
    if problems.is_empty() {
        Ok(fbc)
    } else {
        Err(problems)
    }
}

fn validate(dir: &Path) -> Output {
    match load_valid(dir) {
        Ok(fbc) => Output {
            code: 0,
            stdout: format!(
                "{} is valid: {} packages, {} channels, {} bundles\n",
                dir.display(),
                fbc.packages.len(),
                fbc.channels.len(),
                fbc.bundles.len()
            )
            .into_bytes(),
            ..Default::default()
        },
        Err(problems) => problems_output(1, &problems),
    }
}

/// How much JSON converted from YAML `render` keeps between its two passes, so each YAML file
/// is parsed once (JSON is cheap to split again; YAML is not).
const RENDER_KEPT_YAML_BYTES: usize = 32 << 20;

/// Renders in two passes over the files, with no model: the first checks every blob (so
/// nothing is printed for an invalid catalog), the second prints each blob's canonical line.
/// One file's bytes are in memory at a time, plus the JSON of YAML files up to
/// [`RENDER_KEPT_YAML_BYTES`] (beyond it, a YAML file is converted again in the second pass).
fn render(dir: &Path, stdout: &mut dyn std::io::Write) -> Output {
    let files = match fbc::load::catalog_files(dir) {
        Ok(files) => files,
        Err(problems) => return problems_output(1, &problems),
    };
    let mut problems = Problems::new();
    let mut kept: Vec<Option<fbc::decode::Documents>> = Vec::with_capacity(files.len());
    let mut kept_bytes = 0;
    for file in &files {
        let name = file.display().to_string();
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                problems.push(bad_input(file, None, e.to_string()));
                kept.push(None);
                continue;
            }
        };
        if !fbc::decode::is_yaml(&bytes) {
            problems.extend(fbc::load::check_file(&name, &bytes));
            kept.push(None);
            continue;
        }
        match fbc::decode::yaml_documents(&bytes) {
            Ok(docs) => {
                problems.extend(fbc::load::check_documents(&name, &docs));
                let fits = kept_bytes + docs.text_len() <= RENDER_KEPT_YAML_BYTES;
                kept_bytes += if fits { docs.text_len() } else { 0 };
                kept.push(fits.then_some(docs));
            }
            Err(e) => {
                problems.push(bad_input(file, Some(e.line), e.message));
                kept.push(None);
            }
        }
    }
    if !problems.is_empty() {
        return problems_output(1, &problems);
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let mut line = Vec::new();
    let mut written = Ok(());
    let mut write = |json: &str, _line: usize| {
        if written.is_ok() {
            line.clear();
            fbc::model::render_blob(json, &mut line);
            written = std::io::Write::write_all(&mut out, &line);
        }
    };
    for (file, docs) in files.iter().zip(kept) {
        if let Some(docs) = docs {
            docs.iter().for_each(|(json, l)| write(json, l));
        } else {
            let bytes = match std::fs::read(file) {
                Ok(b) => b,
                Err(e) => {
                    return problems_output(1, &vec![bad_input(file, None, e.to_string())].into());
                }
            };
            if let Err(e) = fbc::decode::decode_with(&bytes, &mut write) {
                return problems_output(1, &vec![bad_input(file, Some(e.line), e.message)].into());
            }
        }
    }
    // A closed pipe (`| head`) ends the output; that is not an error worth reporting.
    if written.is_err() {
        return Output::default();
    }
    let _ = std::io::Write::flush(&mut out);
    Output::default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemFile {
    #[serde(default)]
    catalogs: Vec<CatalogSpec>,
    #[serde(default)]
    operators: Vec<Request>,
    #[serde(default)]
    installed: Vec<Installed>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogSpec {
    name: String,
    path: PathBuf,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn bad_input(file: &Path, line: Option<usize>, message: impl Into<String>) -> Problem {
    Problem {
        origin: line.map(|line| fbc::Origin {
            file: Arc::from(file.display().to_string()),
            line,
        }),
        message: match line {
            Some(_) => message.into(),
            None => format!("{}: {}", file.display(), message.into()),
        },
    }
}

/// Reads the problem file and every catalog it names.
fn load_problem(path: &Path) -> Result<(Vec<CatalogInput>, ProblemFile), Problems> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Problems::from(vec![bad_input(path, None, e.to_string())]))?;
    let problem: ProblemFile = serde_saphyr::from_str(&text).map_err(|e| {
        let line = e.location().map(|l| l.line() as usize);
        let message = e.to_string();
        let first = message.lines().next().unwrap_or_default();
        Problems::from(vec![bad_input(
            path,
            Some(line.unwrap_or(1)),
            first.rsplit_once(" at line ").map_or(first, |(m, _)| m),
        )])
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut catalogs = Vec::new();
    let mut problems = Problems::new();
    let mut names = HashSet::new();
    for c in &problem.catalogs {
        if !names.insert(c.name.clone()) {
            problems.push(bad_input(
                path,
                None,
                format!("catalog {:?} is listed twice", c.name),
            ));
            continue;
        }
        match load_valid(&base.join(&c.path)) {
            Ok(fbc) => catalogs.push(CatalogInput {
                name: c.name.clone(),
                priority: c.priority,
                labels: c.labels.clone(),
                fbc: Arc::new(fbc),
            }),
            Err(more) => problems.extend(more),
        }
    }
    if problem.operators.is_empty() {
        problems.push(bad_input(path, None, "no operators are requested"));
    }
    if problems.is_empty() {
        Ok((catalogs, problem))
    } else {
        Err(problems)
    }
}

fn solve(path: &Path, timings: bool) -> Output {
    let (catalogs, problem) = match load_problem(path) {
        Ok(p) => p,
        Err(problems) => return problems_output(2, &problems),
    };
    let times = timings.then(|| timed(&catalogs, &problem));
    let scoped = scoped_index(catalogs, &problem);
    let mut out = match resolve::resolve(&scoped, &problem.operators, &problem.installed) {
        Ok(bundles) => chosen(bundles),
        // The explanation may name packages no request does: it is worded over the whole
        // catalogs, read again (a failure is rare, and the models were taken by the index).
        Err(_) => match load_problem(path) {
            Ok((catalogs, problem)) => solved(path, &index_of(catalogs), &problem),
            Err(problems) => problems_output(2, &problems),
        },
    };
    if let Some((index_ms, resolve_ms)) = times {
        out.stderr.push_str(&format!(
            "index {index_ms:.3} resolve {resolve_ms:.3} (ms, median of {TIMED_RUNS})\n"
        ));
    }
    out
}

/// The index of the requested packages alone: all a resolution can choose from (only requested
/// packages offer candidates), so it gives the same answer as the whole catalogs' index, built
/// in a fraction of the time. A failure is explained over the whole index.
fn scoped_index(catalogs: Vec<CatalogInput>, problem: &ProblemFile) -> Index {
    let wanted: HashSet<&str> = problem
        .operators
        .iter()
        .map(|r| r.package_name.as_str())
        .collect();
    Index::from_contents(catalogs.into_iter().map(|c| {
        (
            resolve::CatalogMeta {
                name: c.name,
                priority: c.priority,
                labels: c.labels,
            },
            Arc::new(resolve::CatalogContent::from_fbc_packages(
                Arc::unwrap_or_clone(c.fbc),
                &|p| wanted.contains(p),
            )),
        )
    }))
}

/// The index of catalogs read for this run alone: their models are taken, not copied.
fn index_of(catalogs: Vec<CatalogInput>) -> Index {
    Index::from_contents(catalogs.into_iter().map(|c| {
        (
            resolve::CatalogMeta {
                name: c.name,
                priority: c.priority,
                labels: c.labels,
            },
            Arc::new(resolve::CatalogContent::from_fbc(Arc::unwrap_or_clone(
                c.fbc,
            ))),
        )
    }))
}

/// Median milliseconds of building the index (of the requested packages, from the loaded
/// catalogs, as a run does) and of resolving.
fn timed(catalogs: &[CatalogInput], problem: &ProblemFile) -> (f64, f64) {
    let mut index_ms = Vec::with_capacity(TIMED_RUNS);
    let mut resolve_ms = Vec::with_capacity(TIMED_RUNS);
    for _ in 0..TIMED_RUNS {
        // A copy of the loaded models for each run, made before the clock starts.
        let copy: Vec<CatalogInput> = catalogs
            .iter()
            .map(|c| CatalogInput {
                fbc: Arc::new((*c.fbc).clone()),
                ..c.clone()
            })
            .collect();
        let start = std::time::Instant::now();
        let index = scoped_index(copy, problem);
        let built = std::time::Instant::now();
        let _ = std::hint::black_box(resolve::resolve(
            &index,
            &problem.operators,
            &problem.installed,
        ));
        index_ms.push((built - start).as_secs_f64() * 1e3);
        resolve_ms.push(built.elapsed().as_secs_f64() * 1e3);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(index_ms), median(resolve_ms))
}

fn chosen(mut bundles: Vec<resolve::Resolved>) -> Output {
    bundles.sort_by(|a, b| a.package.cmp(&b.package).then(a.request.cmp(&b.request)));
    let json = serde_json::json!({ "bundles": bundles });
    Output {
        code: 0,
        stdout: format!("{json}\n").into_bytes(),
        ..Default::default()
    }
}

fn solved(path: &Path, index: &Index, problem: &ProblemFile) -> Output {
    match resolve::resolve(index, &problem.operators, &problem.installed) {
        Ok(bundles) => chosen(bundles),
        Err(ResolveError::InvalidRequest(errors)) => Output {
            code: 2,
            stderr: errors
                .iter()
                .map(|e| format!("{}: {e}\n", path.display()))
                .collect(),
            ..Default::default()
        },
        Err(err) => {
            let kind = match err {
                ResolveError::Ambiguous(_) => "ambiguous",
                _ => "unsatisfiable",
            };
            let sentences = err.sentences();
            let json = serde_json::json!({ "error": kind, "explanation": sentences });
            Output {
                code: 1,
                stdout: format!("{json}\n").into_bytes(),
                stderr: sentences.iter().map(|s| format!("{s}\n")).collect(),
            }
        }
    }
}
