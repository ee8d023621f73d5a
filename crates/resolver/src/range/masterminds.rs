//! Masterminds/semver v3.2.1 constraints: the syntax of a ClusterExtension's `spec.version`.
//!
//! A reimplementation of upstream `constraints.go`/`version.go` at tag v3.2.1. Upstream parses
//! with three regular expressions; each reduces to a deterministic longest-match scan (a version
//! never contains whitespace or a comma), which is what this module does, so it accepts exactly
//! the strings upstream accepts and gives them the same meaning:
//!
//! * AND is whitespace or a comma, OR is `||`, there are no parentheses;
//! * operators `=` (or none), `!=`, `>`, `<`, `>=` (`=>`), `<=` (`=<`), `~` (`~>`), `^`;
//! * `x`, `X`, `*` and missing parts are wildcards: `1.2` = `1.2.x` = `>=1.2.0 <1.3.0`,
//!   `>1.2` = `>=1.3.0`, `<=1.2` = `<1.3.0`; anything after the first wildcard is ignored
//!   (`1.x.5` = `1.x`); numbers may have leading zeros and a `v` prefix;
//! * `A - B` is `>=A <=B`;
//! * a prerelease version only satisfies a comparator whose own version has a prerelease
//!   (`>=1.0.0` rejects `1.1.0-rc.1`, `>=1.0.0-0 <2.0.0-0` accepts it), except that an exact
//!   `!=1.2.3` (no wildcard) has no such check;
//! * the empty string is an error.
//!
//! Upstream quirks kept on purpose (see the tests): `^*` matches only `0.0.0`; `<=*` matches
//! `0.0.z` only; `!=*` and `>*` match everything but `0.0.0`; `~0.0.0` and `*` match every
//! release; `>=1.0 1.2 - 1.4` is an error (the hyphen rewrite swallows the space before it,
//! a comma works); `3||1 - 2` means `>=3 || (1.x, <=2)` because a `|` can be part of a version
//! there. Display gives the original text, not upstream's normalised `String()`.
//!
//! The parser was checked against the Go original on several hundred thousand generated
//! inputs, with no difference in acceptance or in matching. Parsing is linear for ordinary
//! input; like any literal emulation of upstream's hyphen rewrite it can go quadratic on long
//! pathological input (tens of kilobytes of digits before a ` - `), which the API's 64-character
//! limit on `spec.version` rules out.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use semver::Version;

use super::RangeError;

/// A parsed Masterminds constraint: an OR of ANDs of comparators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    original: String,
    alternatives: Vec<Vec<Comparator>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    NotEqual,
    Greater,
    Less,
    GreaterEqual,
    LessEqual,
    Tilde,
    Caret,
}

/// One comparator, as upstream's `constraint` struct: the version with wildcards zeroed, plus
/// which part was a wildcard (`dirty` = some part was; `minor_dirty`: from the minor on;
/// `patch_dirty`: only the patch). A wildcard major sets `dirty` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

impl Constraint {
    /// Parses a constraint such as `>=1.2, <2 || ~3.1`.
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        let rewritten = rewrite_hyphen_ranges(input);
        let alternatives = rewritten
            .split("||")
            .map(parse_and_group)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| RangeError::range(input, reason))?;
        Ok(Constraint {
            original: input.to_owned(),
            alternatives,
        })
    }

    /// Whether `version` satisfies the constraint. Build metadata is ignored.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|group| group.iter().all(|c| c.matches(version)))
    }

    /// The text this constraint was parsed from.
    pub fn as_str(&self) -> &str {
        &self.original
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl FromStr for Constraint {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Constraint::parse(s)
    }
}

// ---- Scanning. Upstream's regexes use Go's `\s`, which is ASCII `[\t\n\f\r ]` only.

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')
}

/// Upstream's number class `[0-9|x|X|\*]`: the `|` is literally part of the class.
fn is_number_char(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'|' | b'x' | b'X' | b'*')
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn is_op_char(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'<' | b'>' | b'~' | b'^')
}

fn run(b: &[u8], start: usize, class: fn(u8) -> bool) -> usize {
    let mut end = start;
    while b.get(end).is_some_and(|&c| class(c)) {
        end += 1;
    }
    end
}

fn text(s: &str, r: Range<usize>) -> &str {
    // Every boundary we cut at is next to an ASCII byte, so `get` cannot fail.
    s.get(r).unwrap_or("")
}

/// The parts of one version as upstream's `cvRegex` matches it (longest match).
struct Cv {
    span: Range<usize>,
    major: Range<usize>,
    minor: Option<Range<usize>>,
    patch: Option<Range<usize>>,
    pre: Option<Range<usize>>,
}

/// `sep` followed by at least one `class` byte: returns the end of that run.
fn part_after(b: &[u8], at: usize, sep: u8, class: fn(u8) -> bool) -> Option<usize> {
    (b.get(at) == Some(&sep) && b.get(at + 1).is_some_and(|&c| class(c)))
        .then(|| run(b, at + 1, class))
}

/// `sep` then dot-separated non-empty identifiers (a prerelease or build suffix).
fn ident_list_after(b: &[u8], at: usize, sep: u8) -> Option<usize> {
    let mut end = part_after(b, at, sep, is_ident_char)?;
    while let Some(next) = part_after(b, end, b'.', is_ident_char) {
        end = next;
    }
    Some(end)
}

fn scan_cv(b: &[u8], start: usize) -> Option<Cv> {
    let mut at = if b.get(start) == Some(&b'v') {
        start + 1
    } else {
        start
    };
    let major_end = run(b, at, is_number_char);
    if major_end == at {
        return None;
    }
    let major = at..major_end;
    at = major_end;
    let minor = part_after(b, at, b'.', is_number_char).map(|end| {
        let r = at + 1..end;
        at = end;
        r
    });
    let patch = minor
        .as_ref()
        .and_then(|_| part_after(b, at, b'.', is_number_char))
        .map(|end| {
            let r = at + 1..end;
            at = end;
            r
        });
    let pre = ident_list_after(b, at, b'-').map(|end| {
        let r = at + 1..end;
        at = end;
        r
    });
    if let Some(end) = ident_list_after(b, at, b'+') {
        at = end;
    }
    Some(Cv {
        span: start..at,
        major,
        minor,
        patch,
        pre,
    })
}

/// Upstream rewrites every `A - B` into `>= A, <= B ` with an unanchored regex
/// `\s*(cv)\s+-\s+(cv)\s*` before anything else, then replaces the first occurrence of each
/// matched text. Reproduced literally, including the whitespace it swallows on both sides.
fn rewrite_hyphen_ranges(input: &str) -> String {
    let b = input.as_bytes();
    // Fast path: no `<space>-<space>`, no match.
    let has_separator = b
        .windows(3)
        .any(|w| is_space(w[0]) && w[1] == b'-' && is_space(w[2]));
    if !has_separator {
        return input.to_owned();
    }
    let mut found = Vec::new();
    let mut p = 0;
    while p < b.len() {
        match hyphen_range_at(b, p) {
            Some((whole, low, high)) => {
                p = whole.end;
                found.push((text(input, whole), text(input, low), text(input, high)));
            }
            None => p += 1,
        }
    }
    let mut out = input.to_owned();
    for (whole, low, high) in found {
        out = out.replacen(whole, &format!(">= {low}, <= {high} "), 1);
    }
    out
}

fn hyphen_range_at(b: &[u8], p: usize) -> Option<(Range<usize>, Range<usize>, Range<usize>)> {
    let low = scan_cv(b, run(b, p, is_space))?;
    let dash = run(b, low.span.end, is_space);
    if dash == low.span.end || b.get(dash) != Some(&b'-') {
        return None;
    }
    let high_start = run(b, dash + 1, is_space);
    if high_start == dash + 1 {
        return None;
    }
    let high = scan_cv(b, high_start)?;
    Some((p..run(b, high.span.end, is_space), low.span, high.span))
}

/// One `||` alternative: `\s*OP\s*CV\s*` items separated by whitespace or a comma (upstream's
/// `validConstraintRegex`). The whole segment is validated before any version is parsed, as
/// upstream does, so the first error reported is the same kind.
fn parse_and_group(segment: &str) -> Result<Vec<Comparator>, String> {
    let b = segment.as_bytes();
    let improper = || format!("improper constraint: {segment}");
    let mut items = Vec::new();
    let mut at = run(b, 0, is_space);
    loop {
        let op_end = run(b, at, is_op_char);
        let op = parse_op(text(segment, at..op_end)).ok_or_else(improper)?;
        let cv = scan_cv(b, run(b, op_end, is_space)).ok_or_else(improper)?;
        let cv_end = cv.span.end;
        items.push((op, text(segment, at..op_end), cv));
        let next = run(b, cv_end, is_space);
        match b.get(next) {
            None => break,
            Some(b',') => at = run(b, next + 1, is_space),
            // Whitespace separates two comparators; anything else right after a version is junk.
            Some(_) if next > cv_end => at = next,
            Some(_) => return Err(improper()),
        }
    }
    items
        .into_iter()
        .map(|(op, op_text, cv)| comparator(segment, op, op_text, &cv))
        .collect()
}

fn parse_op(op: &str) -> Option<Op> {
    Some(match op {
        "" | "=" => Op::Equal,
        "!=" => Op::NotEqual,
        ">" => Op::Greater,
        "<" => Op::Less,
        ">=" | "=>" => Op::GreaterEqual,
        "<=" | "=<" => Op::LessEqual,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        _ => return None,
    })
}

fn is_wildcard(part: &str) -> bool {
    matches!(part, "x" | "X" | "*")
}

/// Upstream's `parseConstraint` then `NewVersion`: the parts from the first wildcard (or missing
/// part) on are replaced by zeros and never looked at, the rest must be plain numbers.
fn comparator(segment: &str, op: Op, op_text: &str, cv: &Cv) -> Result<Comparator, String> {
    let version = text(segment, cv.span.clone());
    let bad = |why: String| {
        format!(
            "cannot parse version {version:?} in {:?}: {why}",
            format!("{op_text}{version}")
        )
    };
    let number = |r: &Range<usize>, what: &str| {
        let s = text(segment, r.clone());
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad(format!("{what} {s:?} is not a number")));
        }
        s.parse::<u64>()
            .map_err(|_| bad(format!("{what} {s:?} does not fit in 64 bits")))
    };
    let pre = cv.pre.clone().map_or("", |r| text(segment, r));
    if let Some(id) = pre
        .split('.')
        .find(|id| id.len() > 1 && id.starts_with('0') && id.bytes().all(|c| c.is_ascii_digit()))
    {
        return Err(bad(format!(
            "numeric prerelease identifier {id:?} has a leading zero"
        )));
    }
    let mut c = Comparator {
        op,
        major: 0,
        minor: 0,
        patch: 0,
        pre: pre.to_owned(),
        dirty: true,
        minor_dirty: false,
        patch_dirty: false,
    };
    let given =
        |r: &Option<Range<usize>>| r.clone().filter(|r| !is_wildcard(text(segment, r.clone())));
    if is_wildcard(text(segment, cv.major.clone())) {
        // `*`, `x.1.2`: 0.0.0 with only `dirty` set.
        return Ok(c);
    }
    c.major = number(&cv.major, "major version")?;
    let Some(minor) = given(&cv.minor) else {
        c.minor_dirty = true;
        return Ok(c);
    };
    c.minor = number(&minor, "minor version")?;
    let Some(patch) = given(&cv.patch) else {
        c.patch_dirty = true;
        return Ok(c);
    };
    c.patch = number(&patch, "patch version")?;
    c.dirty = false;
    Ok(c)
}

// ---- Matching: upstream's constraint functions, branch for branch.

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        // "A prerelease is only matched by a comparator looking for prereleases" (upstream
        // issue 21), checked by every function except the exact `!=`.
        let unwanted_pre = !v.pre.is_empty() && self.pre.is_empty();
        match self.op {
            Op::NotEqual => self.not_equal(v),
            _ if unwanted_pre => false,
            Op::Equal if self.dirty => self.tilde(v),
            Op::Equal => self.compare(v) == Ordering::Equal,
            Op::Greater => self.greater(v),
            Op::Less => self.compare(v) == Ordering::Less,
            Op::GreaterEqual => self.compare(v) != Ordering::Less,
            Op::LessEqual => self.less_equal(v),
            Op::Tilde => self.tilde(v),
            Op::Caret => self.caret(v),
        }
    }

    /// `v` compared with this comparator's version, upstream's `Version.Compare`.
    fn compare(&self, v: &Version) -> Ordering {
        (v.major, v.minor, v.patch)
            .cmp(&(self.major, self.minor, self.patch))
            .then_with(|| match (v.pre.is_empty(), self.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(v.pre.as_str(), &self.pre),
            })
    }

    fn not_equal(&self, v: &Version) -> bool {
        if self.dirty {
            if !v.pre.is_empty() && self.pre.is_empty() {
                return false;
            }
            if v.major != self.major {
                return true;
            }
            if self.minor_dirty {
                return false;
            }
            if v.minor != self.minor {
                return true;
            }
            if self.patch_dirty {
                // Same major.minor: excluded unless the prereleases differ.
                return compare_prerelease(v.pre.as_str(), &self.pre) != Ordering::Equal;
            }
            // A wildcard major (`!=*`) falls through to comparing with 0.0.0.
        }
        self.compare(v) != Ordering::Equal
    }

    fn greater(&self, v: &Version) -> bool {
        if !self.dirty {
            return self.compare(v) == Ordering::Greater;
        }
        match v.major.cmp(&self.major) {
            Ordering::Greater => true,
            Ordering::Less => false,
            // `>1` needs 2.0.0.
            Ordering::Equal if self.minor_dirty => false,
            // `>1.2` needs 1.3.0.
            Ordering::Equal if self.patch_dirty => v.minor > self.minor,
            // A wildcard major (`>*`): greater than 0.0.0.
            Ordering::Equal => self.compare(v) == Ordering::Greater,
        }
    }

    fn less_equal(&self, v: &Version) -> bool {
        if !self.dirty {
            return self.compare(v) != Ordering::Greater;
        }
        // Anything up to the end of the wildcard's range; note no check on the patch, so a
        // wildcard major (`<=*`) keeps 0.0.z.
        v.major < self.major
            || (v.major == self.major && (self.minor_dirty || v.minor <= self.minor))
    }

    fn tilde(&self, v: &Version) -> bool {
        if self.compare(v) == Ordering::Less {
            return false;
        }
        // `~0.0.0` and a wildcard major accept everything (upstream's special case).
        if (self.major, self.minor, self.patch) == (0, 0, 0)
            && !self.minor_dirty
            && !self.patch_dirty
        {
            return true;
        }
        v.major == self.major && (self.minor_dirty || v.minor == self.minor)
    }

    fn caret(&self, v: &Version) -> bool {
        if self.compare(v) == Ordering::Less {
            return false;
        }
        if self.major > 0 || self.minor_dirty {
            return v.major == self.major;
        }
        if v.major > 0 {
            return false;
        }
        if self.minor > 0 || self.patch_dirty {
            return v.minor == self.minor;
        }
        v.minor == 0 && v.patch == self.patch
    }
}

/// Upstream's `comparePrerelease`: identifiers compared pairwise, a missing one is smaller,
/// numbers (that fit in a u64) compare numerically and below strings, strings bytewise.
fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.split('.'), b.split('.'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (x, y) => match compare_prerelease_part(x.unwrap_or(""), y.unwrap_or("")) {
                Ordering::Equal => {}
                other => return other,
            },
        }
    }
}

fn compare_prerelease_part(s: &str, o: &str) -> Ordering {
    let number = |x: &str| {
        x.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| x.parse::<u64>().ok())
            .flatten()
    };
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() || o.is_empty() {
        return if s.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    match (number(s), number(o)) {
        (None, None) => s.cmp(o),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (Some(x), Some(y)) => {
            if x > y {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn c(s: &str) -> Constraint {
        Constraint::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    /// Every row was checked against upstream v3.2.1 itself (Go, `NewConstraint` + `Check`).
    #[rustfmt::skip]
    const MATCHES: &[(&str, &[&str], &[&str])] = &[
        ("1.2.3", &["1.2.3", "1.2.3+build"], &["1.2.4", "1.2.2", "1.2.3-beta"]),
        ("=1.2.3", &["1.2.3"], &["1.2.4"]),
        ("v1.2.3", &["1.2.3"], &["1.2.4"]),
        ("=v1.2.3+meta", &["1.2.3", "1.2.3+other"], &["1.2.4"]),
        ("01.02.03", &["1.2.3"], &["1.2.4"]),
        ("1.2", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0", "1.2.5-beta"]),
        ("1.2.x", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0"]),
        ("=1.2", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0"]),
        ("1.2.X", &["1.2.0"], &["1.1.9", "1.3.0"]),
        ("v1.2.*", &["1.2.0"], &["1.1.9", "1.3.0"]),
        ("1", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("1.x", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("1.x.x", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("1.x.5", &["1.0.0", "1.9.9"], &["2.0.0"]),
        ("*", &["0.0.0", "1.0.0", "99.0.0"], &["1.0.0-rc.1"]),
        ("x", &["0.0.0", "1.0.0", "99.0.0"], &["1.0.0-rc.1"]),
        ("X", &["0.0.0", "99.0.0"], &[]),
        ("x.5.7", &["0.0.0", "99.0.0"], &[]),
        (">1.2", &["1.3.0", "2.0.0"], &["1.2.0", "1.2.9"]),
        (">1", &["2.0.0"], &["1.0.0", "1.9.9"]),
        (">1.2.3", &["1.2.4"], &["1.2.3", "1.2.4-rc.1"]),
        ("<=1.2", &["0.1.0", "1.2.9"], &["1.3.0"]),
        ("<=1", &["0.1.0", "1.9.9"], &["2.0.0"]),
        ("<=1.2.3", &["1.2.3"], &["1.2.4"]),
        ("=<1.2.3", &["1.2.3"], &["1.2.4"]),
        (">=1.2", &["1.2.0", "1.2.1"], &["1.1.9"]),
        ("=>1.2", &["1.2.0"], &["1.1.9"]),
        ("<1.2", &["1.1.9"], &["1.2.0"]),
        ("<1.2.3", &["1.2.2"], &["1.2.3"]),
        ("~1.2.3", &["1.2.3", "1.2.9"], &["1.2.2", "1.3.0"]),
        ("~>1.2.3", &["1.2.3", "1.2.9"], &["1.2.2", "1.3.0"]),
        ("~1.2", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0"]),
        ("~1", &["1.0.0", "1.9.9"], &["0.9.0", "2.0.0"]),
        ("~0", &["0.0.0", "0.9.9"], &["1.0.0"]),
        ("~0.0.0", &["0.0.0", "5.0.0"], &[]),
        ("~*", &["0.0.0", "5.0.0"], &[]),
        ("^1.2.3", &["1.2.3", "1.9.9"], &["1.2.2", "2.0.0"]),
        ("^1.2", &["1.2.0", "1.9.9"], &["1.1.9", "2.0.0"]),
        ("^1", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("^0.2.3", &["0.2.3", "0.2.9"], &["0.2.2", "0.3.0"]),
        ("^0.2", &["0.2.0", "0.2.9"], &["0.1.9", "0.3.0"]),
        ("^0.0.3", &["0.0.3"], &["0.0.2", "0.0.4"]),
        ("^0", &["0.0.0", "0.9.9"], &["1.0.0"]),
        ("^0.0", &["0.0.0", "0.0.9"], &["0.1.0"]),
        ("^*", &["0.0.0"], &["0.0.1", "1.0.0"]),
        ("!=1.2", &["1.1.9", "1.3.0"], &["1.2.0", "1.2.9", "1.2.5-beta"]),
        ("!=1.2.3", &["1.2.4", "1.2.4-beta"], &["1.2.3", "1.2.3+b"]),
        ("!=1.x", &["0.9.9", "2.0.0"], &["1.0.0", "1.9.9"]),
        ("!=*", &["0.0.1", "1.0.0"], &["0.0.0"]),
        ("!=1.2.x-beta", &["1.2.5", "1.2.5-alpha", "1.3.0"], &["1.2.5-beta"]),
        ("<=*", &["0.0.0", "0.0.5"], &["0.1.0"]),
        (">*", &["0.0.1", "3.0.0"], &["0.0.0"]),
        (">=*", &["0.0.0", "3.0.0"], &["3.0.0-rc.1"]),
        ("<*", &[], &["0.0.0", "0.0.0-0"]),
        ("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.1.9", "1.4.6"]),
        ("1.2.3 - 2", &["1.2.3", "2.9.9"], &["1.2.2", "3.0.0"]),
        ("v1.2\t-\tv1.4", &["1.2.0", "1.4.9"], &["1.1.9", "1.5.0"]),
        ("1.0 - 2.0, 1.5", &["1.5.0", "1.5.3"], &["1.0.0", "1.6.0"]),
        ("1.5, 1.0 - 2.0", &["1.5.0", "1.5.3"], &["1.0.0", "1.6.0"]),
        ("1 - 2 || 4 - 5", &["1.0.0", "2.9.0", "4.0.0", "5.9.9"], &["0.9.0", "3.0.0", "6.0.0"]),
        ("3||1 - 2", &["1.0.0", "1.5.0", "3.0.0", "3.5.0", "4.0.0"], &["2.5.0"]),
        (">=1.0.0", &["1.0.0", "1.1.0"], &["0.9.9", "1.1.0-rc.1"]),
        (">=1.0.0-0", &["1.0.0-0", "1.1.0-rc.1", "1.1.0"], &["0.9.9"]),
        (">=1.0.0-0 <2.0.0", &["1.5.0"], &["1.0.0-0", "1.1.0-rc.1", "2.0.0-rc.1", "2.0.0"]),
        (">=1.0.0-0 <2.0.0-0", &["1.0.0-0", "1.1.0-rc.1", "1.9.9"], &["2.0.0-0", "2.0.0-rc.1", "2.0.0"]),
        (">=1.0.0-0, <2.0.0-0", &["1.1.0-rc.1"], &["2.0.0-rc.1"]),
        ("1.2.3-beta", &["1.2.3-beta"], &["1.2.3-beta.1", "1.2.3"]),
        ("~1.2.3-beta", &["1.2.3-beta.2", "1.2.4-alpha", "1.2.3"], &["1.2.3-alpha", "1.3.0-alpha"]),
        ("^1.2.3-beta.2", &["1.2.3-beta.11", "1.9.0-rc"], &["1.2.3-beta.1", "2.0.0-rc"]),
        ("<1.0.0-rc.1", &["0.9.0", "1.0.0-beta"], &["1.0.0-rc.1"]),
        (">1.x-beta", &["2.0.0-alpha", "2.0.0"], &["1.5.0"]),
        ("1.2.3-1 || 1.2.3-alpha", &["1.2.3-1", "1.2.3-alpha"], &["1.2.3-2"]),
        (">=1.0.0-alpha.9", &["1.0.0-alpha.10", "1.0.0-alpha.9a", "1.0.0-alpha.beta"], &["1.0.0-alpha"]),
        (">=1.0.0 <2.0.0", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        (">=1.0.0,<2.0.0", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        (">=1.0.0 , <2.0.0", &["1.0.0"], &["0.9.9", "2.0.0"]),
        (">= 1.0.0, < 2.0.0", &["1.0.0"], &["0.9.9", "2.0.0"]),
        ("  >=1.0.0\t<2.0.0\n", &["1.0.0"], &["0.9.9", "2.0.0"]),
        (">=1.0.0 ,\t<2.0.0", &["1.0.0"], &["0.9.9", "2.0.0"]),
        ("<1.0.0 || >=2.0.0", &["0.9.9", "2.0.0"], &["1.0.0", "1.9.9"]),
        ("<1.0.0||>=2.0.0", &["0.9.9", "2.0.0"], &["1.0.0"]),
        ("1.2 || 1.4 || 2.x", &["1.2.5", "1.4.1", "2.7.0"], &["1.3.0", "3.0.0"]),
        (">=1 <1", &[], &["0.9.9", "1.0.0"]),
        ("~ 1.2", &["1.2.5"], &["1.3.0"]),
        ("^ 1.2", &["1.2.5"], &["2.0.0"]),
    ];
    #[rustfmt::skip]
    const ERRORS: &[&str] = &[
        "", " ", "||", "1 ||", "|| 1", "|", "1 | 2", "1 ||| 2", "abc", "1.2.3.4", "1.2.3.x", ">=",
        "==1", "<>1", "> =1", "V1.2", "1x", "x1", "1.2|3", "99999999999999999999", "1.2.3-",
        "1.2.3-01", "1.x-01", ">1.0 1.2 - 1.4", "1 - 2 - 3", "1,,2", ",1", "1,", "1.2.3 -beta",
        ">=1.0.0<2.0.0", "~ >1", "1.2.3+b+c", "!1.2.3", "1.2.3 - ", "- 1.2.3", ">= 1 - 2",
        "1.2.3a", "1.a", "é", "1.2.3 é", "+1.2.3", "-1.2.3",
    ];

    #[test]
    fn matches_upstream_table() {
        for (constraint, yes, no) in MATCHES {
            let parsed = c(constraint);
            for version in *yes {
                assert!(
                    parsed.matches(&v(version)),
                    "{constraint:?} should match {version}"
                );
            }
            for version in *no {
                assert!(
                    !parsed.matches(&v(version)),
                    "{constraint:?} should not match {version}"
                );
            }
        }
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for input in ERRORS {
            let err = Constraint::parse(input).expect_err(input);
            let prefix = format!("invalid version range {input:?}: ");
            assert!(err.to_string().starts_with(&prefix), "{err}");
        }
    }

    #[test]
    fn error_messages() {
        let msg = |s: &str| Constraint::parse(s).unwrap_err().to_string();
        assert_eq!(
            msg("abc"),
            r#"invalid version range "abc": improper constraint: abc"#
        );
        assert_eq!(
            msg(""),
            r#"invalid version range "": improper constraint: "#
        );
        assert_eq!(
            msg("1 || >="),
            r#"invalid version range "1 || >=": improper constraint:  >="#
        );
        assert!(
            msg("1.2.3-01").contains("leading zero"),
            "{}",
            msg("1.2.3-01")
        );
        assert!(
            msg("1x").contains(r#"major version "1x" is not a number"#),
            "{}",
            msg("1x")
        );
        assert!(msg("99999999999999999999").contains("64 bits"));
        // Upstream reports the text after the hyphen-range rewrite.
        assert!(msg(">=1.0 1.2 - 1.4").ends_with("improper constraint: >=1.0>= 1.2, <= 1.4 "));
    }

    /// Each pair means the same on a grid of releases and prereleases.
    #[test]
    fn documented_equivalences() {
        let pairs = [
            ("1.2", ">=1.2.0 <1.3.0"),
            ("1.2.x", ">=1.2.0 <1.3.0"),
            ("=1.2", ">=1.2.0 <1.3.0"),
            ("1", ">=1.0.0 <2.0.0"),
            ("1.x", ">=1.0.0 <2.0.0"),
            ("*", ">=0.0.0"),
            ("x", ">=0.0.0"),
            (">1.2", ">=1.3.0"),
            (">1", ">=2.0.0"),
            ("<=1.2", "<1.3.0"),
            (">=1.2", ">=1.2.0"),
            ("<1.2", "<1.2.0"),
            ("~1.2.3", ">=1.2.3 <1.3.0"),
            ("~1", ">=1.0.0 <2.0.0"),
            ("^1.2.3", ">=1.2.3 <2.0.0"),
            ("^0.2.3", ">=0.2.3 <0.3.0"),
            ("^0.0.3", ">=0.0.3 <0.0.4"),
            ("^0", "<1.0.0"),
            ("^0.0", "<0.1.0"),
            ("!=1.2", "<1.2.0 || >=1.3.0"),
            ("1.2 - 1.4.5", ">=1.2 <=1.4.5"),
            ("1.2 - 1.4.5", ">=1.2.0, <1.4.6"),
            ("=>1.2.3, =<2.0.0", ">=1.2.3 <=2.0.0"),
            ("~>1.2", "~1.2"),
            ("v1.2.3", "1.2.3"),
            ("1.x.5", "1.x"),
        ];
        let mut grid = Vec::new();
        for major in 0..4 {
            for minor in 0..5 {
                for patch in 0..6 {
                    for pre in ["", "-0", "-rc.1"] {
                        grid.push(v(&format!("{major}.{minor}.{patch}{pre}")));
                    }
                }
            }
        }
        for (a, b) in pairs {
            let (ca, cb) = (c(a), c(b));
            for version in &grid {
                assert_eq!(
                    ca.matches(version),
                    cb.matches(version),
                    "{a:?} vs {b:?} on {version}"
                );
            }
        }
    }

    #[test]
    fn prereleases_need_a_prerelease_in_each_comparator() {
        let rc = v("1.1.0-rc.1");
        assert!(!c(">=1.0.0").matches(&rc));
        assert!(c(">=1.0.0-0").matches(&rc));
        assert!(!c(">=1.0.0-0 <2.0.0").matches(&rc));
        assert!(c(">=1.0.0-0 <2.0.0-0").matches(&rc));
        assert!(c(">=1.0.0-0, <2.0.0-0").matches(&rc));
        // The exact `!=` is the one comparator without the check.
        assert!(c("!=1.0.0").matches(&rc));
        assert!(!c("!=1.0").matches(&rc));
    }

    #[test]
    fn display_and_from_str_keep_the_original_text() {
        for text in [">= 1.2, <2", "1.2 - 1.4.5", "  ^1  ", "~1.2.3 || 2.x"] {
            let parsed: Constraint = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.as_str(), text);
            assert_eq!(c(&parsed.to_string()), parsed);
        }
    }

    #[test]
    fn prerelease_precedence_is_upstreams() {
        use Ordering::*;
        let cases = [
            ("alpha", "alpha.1", Less),
            ("alpha.1", "alpha.beta", Less),
            ("beta.2", "beta.11", Less),
            ("rc.1", "1", Greater),
            ("1", "1", Equal),
            // Numbers too big for a u64 compare as strings upstream.
            ("99999999999999999999", "100000000000000000000", Greater),
            ("-x", "99999999999999999999", Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_prerelease(a, b), want, "{a} vs {b}");
            assert_eq!(compare_prerelease(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn long_and_odd_inputs_do_not_panic() {
        let long = "1.2.3 ".repeat(2000);
        assert!(c(&long).matches(&v("1.2.3")));
        let ranges = "1 - 2, ".repeat(500) + "1";
        assert!(c(&ranges).matches(&v("1.5.0")));
        for odd in [
            "\u{0}",
            "1.2.3\u{300}",
            "ü - ü",
            "1 - 2 - ",
            "||||",
            "v",
            "v-",
            "1.-",
            "1.2.3-+",
        ] {
            let _ = Constraint::parse(odd);
        }
    }
}
