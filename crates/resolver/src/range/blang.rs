//! blang/semver v4.0.0 ranges: the syntax of `olm.skipRange` and of
//! `olm.package.required.versionRange`.
//!
//! A step-for-step reimplementation of upstream `v4/range.go` (`ParseRange`), so that the same
//! strings are accepted with the same meaning:
//!
//! * comparators `<`, `<=`, `>`, `>=`, `=`/`==`/none, `!`/`!=`; no `~`, no `^`;
//! * AND is a space (only `' '`), OR is a separate `||` token; no commas, no parentheses;
//!   a space right after `<`, `>` or `=` is allowed (`>= 1.0.0`);
//! * versions are strict `MAJOR.MINOR.PATCH[-PRE][+BUILD]` (no `v`, no `1.0`);
//! * a term containing a lowercase `x` anywhere is rewritten first: `1.2.x` = `>=1.2.0 <1.3.0`,
//!   `1.x` = `>=1.0.0 <2.0.0`, `>1.2.x` = `>=1.3.0`, `<=1.x` = `<2.0.0`, `<1.2.x` = `<1.2.0`,
//!   `!=1.x` = `<1.0.0 >=2.0.0` (matches nothing);
//! * prereleases use plain semver precedence: `>=1.0.0 <2.0.0` matches `2.0.0-rc.1`.
//!
//! Upstream quirks kept on purpose (all pinned by tests):
//! * space-separated tokens of a single byte are silently dropped (`>=1.0.0 5` = `>=1.0.0`, and
//!   `1.0.0 - 2.0.0` = `1.0.0 2.0.0`, which matches nothing); so `! 1.0.0` means `1.0.0`;
//! * in a term with an `x` in its prerelease or build (`<=1.0.0-linux`), only `>=` and `<` work:
//!   `>`, `<=`, `=`, `!=` fail to parse;
//! * in a term with an `x`, an operator upstream does not know is dropped, so `~1.2.x` and
//!   `^1.x` parse as `=1.2.0` and `=1.0.0`;
//! * `1.x.x` is `>=1.0.0 <1.1.0` (upstream treats it as a patch wildcard); `.x` in a prerelease
//!   becomes `.0` (`>=1.0.0-beta.x` = `>=1.0.0-beta.0`);
//! * the number bumped for a wildcard is read like Go's `Atoi`, so `<=1.+5.x` = `<1.6.0`.
//!
//! Deliberate divergences, on inputs where upstream misbehaves: an empty alternative
//! (`1.0.0 || || 2.0.0`) is an error here, where upstream parses it and then panics when
//! checking a version that the alternatives before it reject; a term whose first numeric
//! character is not an ASCII digit (`٣`, `²`) is an error here, where upstream may accept it
//! as a wildcard term with an unknown operator. Apart from these, the parser was checked
//! against the Go original on a few hundred thousand generated inputs, with no difference in
//! acceptance or in matching.

use std::fmt;
use std::str::FromStr;

use semver::Version;

use super::RangeError;

/// A parsed blang range: an OR of ANDs of comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    original: String,
    alternatives: Vec<Vec<Term>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    NotEqual,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    op: Op,
    version: Version,
}

impl Range {
    /// Parses a range such as `>=1.0.0 <2.0.0 || 3.x`.
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        parse_groups(input)
            .map(|alternatives| Range {
                original: input.to_owned(),
                alternatives,
            })
            .map_err(|reason| RangeError::range(input, reason))
    }

    /// Whether `version` is in the range (semver precedence; build metadata ignored).
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|group| group.iter().all(|t| t.matches(version)))
    }

    /// The text this range was parsed from.
    pub fn as_str(&self) -> &str {
        &self.original
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl FromStr for Range {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Range::parse(s)
    }
}

impl Term {
    fn matches(&self, v: &Version) -> bool {
        let ord = v.cmp_precedence(&self.version);
        match self.op {
            Op::Equal => ord.is_eq(),
            Op::NotEqual => ord.is_ne(),
            Op::Greater => ord.is_gt(),
            Op::GreaterEqual => ord.is_ge(),
            Op::Less => ord.is_lt(),
            Op::LessEqual => ord.is_le(),
        }
    }
}

fn parse_groups(input: &str) -> Result<Vec<Vec<Term>>, String> {
    let groups = split_or(split_and_trim(input))?;
    let groups = groups
        .into_iter()
        .map(expand_wildcards)
        .collect::<Result<Vec<_>, _>>()?;
    groups
        .iter()
        .map(|group| group.iter().map(|part| term(part)).collect())
        .collect()
}

/// Upstream's `splitAndTrim`: split on `' '` unless the last non-space byte was `<`, `>` or
/// `=`, keep only tokens of two bytes or more, then delete the spaces inside each token.
fn split_and_trim(s: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut push = |from: usize, to: usize| {
        // Two bytes or more: upstream's `last < i-1`. Cut points sit next to a space.
        if from + 1 < to {
            tokens.push(s.get(from..to).unwrap_or("").replace(' ', ""));
        }
    };
    let (mut last, mut last_char) = (0, 0u8);
    for (i, &b) in s.as_bytes().iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'<' | b'>' | b'=') {
            push(last, i);
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    push(last, s.len());
    tokens
}

/// Upstream's `splitORParts`, plus an error for an empty alternative (see the module docs).
fn split_or(tokens: Vec<String>) -> Result<Vec<Vec<String>>, String> {
    if tokens.is_empty() {
        return Err("range is empty".to_owned());
    }
    let mut groups = vec![Vec::new()];
    for (i, token) in tokens.into_iter().enumerate() {
        if token != "||" {
            if let Some(group) = groups.last_mut() {
                group.push(token);
            }
        } else if i == 0 {
            return Err("first element in range is '||'".to_owned());
        } else if groups.last().is_some_and(Vec::is_empty) {
            return Err("empty alternative between '||'".to_owned());
        } else {
            groups.push(Vec::new());
        }
    }
    if groups.last().is_some_and(Vec::is_empty) {
        return Err("last element in range is '||'".to_owned());
    }
    Ok(groups)
}

/// Upstream's `splitComparatorVersion`: the operator is everything before the first digit,
/// trimmed of (Unicode) whitespace.
fn split_op_version(s: &str) -> Result<(&str, &str), String> {
    match s.char_indices().find(|(_, c)| c.is_numeric()) {
        Some((i, c)) if c.is_ascii_digit() => {
            Ok((s.get(..i).unwrap_or("").trim(), s.get(i..).unwrap_or("")))
        }
        _ => Err(format!("could not get version from string: {s:?}")),
    }
}

/// Upstream's `expandWildcardVersion` for one AND group.
fn expand_wildcards(group: Vec<String>) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(group.len());
    for part in group {
        if !part.contains('x') {
            out.push(part);
            continue;
        }
        let (op, version) = split_op_version(&part)?;
        let flat = flatten_wildcard(version);
        // Which number the range's end bumps: a 2-part `1.x` bumps the major, a 3-part
        // `1.2.x` the minor; anything else (an `x` only in a prerelease) leaves no version.
        let parts: Vec<&str> = version.split('.').collect();
        let bump = match (parts.len(), parts.last()) {
            (2, Some(&"x")) => Some(0),
            (3, Some(&"x")) => Some(1),
            _ => None,
        };
        let (result_op, increment) = match op {
            ">" => (">=", true),
            ">=" => (">=", false),
            "<" => ("<", false),
            "<=" => ("<", true),
            "" | "=" | "==" => {
                out.push(format!(">={flat}"));
                ("<", true)
            }
            "!=" | "!" => {
                out.push(format!("<{flat}"));
                (">=", true)
            }
            _ => ("", false),
        };
        let result_version = match (increment, bump) {
            (false, _) => flat,
            (true, Some(index)) => bump_part(&flat, index),
            (true, None) => String::new(),
        };
        out.push(format!("{result_op}{result_version}"));
    }
    Ok(out)
}

/// Upstream's `createVersionFromWildcard`: `.x.x` → `.x`, then the first `.x` → `.0`, then a
/// `.0` appended to a two-part result.
fn flatten_wildcard(version: &str) -> String {
    let flat = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if flat.split('.').count() == 2 {
        flat + ".0"
    } else {
        flat
    }
}

/// Upstream's `incrementMajorVersion`/`incrementMinorVersion`: Go's `Atoi` (optional sign,
/// 64-bit), plus one with wraparound; a part that does not parse yields an empty version.
fn bump_part(version: &str, index: usize) -> String {
    let mut parts: Vec<String> = version.split('.').map(str::to_owned).collect();
    match parts.get(index).and_then(|p| p.parse::<i64>().ok()) {
        Some(n) => {
            if let Some(p) = parts.get_mut(index) {
                *p = n.wrapping_add(1).to_string();
            }
            parts.join(".")
        }
        None => String::new(),
    }
}

fn term(part: &str) -> Result<Term, String> {
    let (op_text, version_text) = split_op_version(part)?;
    let op = match op_text {
        "" | "=" | "==" => Op::Equal,
        "!" | "!=" => Op::NotEqual,
        ">" => Op::Greater,
        ">=" => Op::GreaterEqual,
        "<" => Op::Less,
        "<=" => Op::LessEqual,
        _ => {
            return Err(format!(
                "could not parse comparator {op_text:?} in {part:?}"
            ));
        }
    };
    let version = super::parse_strict(version_text)
        .map_err(|why| format!("could not parse version {version_text:?} in {part:?}: {why}"))?;
    Ok(Term { op, version })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn r(s: &str) -> Range {
        Range::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    /// Every row was checked against upstream v4.0.0 itself (Go, `ParseRange`).
    #[rustfmt::skip]
    const MATCHES: &[(&str, &[&str], &[&str])] = &[
        ("1.0.0", &["1.0.0", "1.0.0+b"], &["0.9.9", "1.0.1", "1.0.0-rc.1"]),
        ("=1.0.0", &["1.0.0"], &["1.0.1"]),
        ("==1.0.0", &["1.0.0"], &["1.0.1"]),
        ("!1.0.0", &["1.0.1", "1.0.0-rc.1"], &["1.0.0"]),
        ("!=1.0.0", &["1.0.1"], &["1.0.0"]),
        ("!= 1.0.0", &["1.0.1"], &["1.0.0"]),
        (">1.0.0", &["1.0.1", "1.0.1-rc.1"], &["1.0.0"]),
        (">=1.0.0", &["1.0.0"], &["0.9.9", "1.0.0-rc.1"]),
        ("<1.0.0", &["0.9.9", "1.0.0-rc.1"], &["1.0.0"]),
        ("<=1.0.0", &["1.0.0", "1.0.0+b"], &["1.0.1"]),
        (">= 1.0.0", &["1.0.0"], &["0.9.9"]),
        ("> 1.0.0  <  2.0.0", &["1.5.0"], &["1.0.0", "2.0.0"]),
        (">=1.0.0 <2.0.0", &["1.0.0", "1.5.0-alpha", "2.0.0-rc.1"], &["0.9.9", "2.0.0"]),
        ("<2.0.0 || >=3.0.0", &["1.9.9", "3.0.0"], &["2.0.0", "2.5.0"]),
        (">1.0.0 <2.0.0 || >3.0.0 !4.2.1", &["1.2.3", "1.9.9", "3.1.1"], &["4.2.1", "2.1.1", "1.0.0"]),
        (">1.0.0 <3.0.0 !2.0.3-beta.2", &["2.0.3-beta.1", "2.0.3"], &["2.0.3-beta.2"]),
        ("1.2.x", &["1.2.0", "1.2.9", "1.2.5-beta", "1.3.0-rc.1"], &["1.1.9", "1.3.0"]),
        ("=1.2.x", &["1.2.0"], &["1.1.9", "1.3.0"]),
        ("1.x", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        (">1.2.x", &["1.3.0"], &["1.2.9", "1.3.0-rc.1"]),
        (">=1.2.x", &["1.2.0"], &["1.1.9"]),
        ("<=1.x", &["1.9.9", "2.0.0-rc.1"], &["2.0.0"]),
        ("<=1.2.x", &["1.2.9"], &["1.3.0"]),
        ("<1.2.x", &["1.1.9", "1.2.0-rc.1"], &["1.2.0"]),
        ("<1.x", &["0.9.9"], &["1.0.0"]),
        (">1.x", &["2.0.0"], &["1.9.9"]),
        (">=1.x", &["1.0.0"], &["0.9.9"]),
        ("!=1.x", &[], &["0.9.9", "1.0.0", "1.5.0", "2.0.0"]),
        ("!=1.2.x", &[], &["1.1.9", "1.2.0", "1.3.0"]),
        ("1.x || >=3.0.0", &["1.5.0", "3.0.0"], &["2.5.0"]),
        (">=1.0.0-linux", &["1.0.0-linux", "1.0.0"], &["1.0.0-alpha"]),
        ("<1.0.0+x86", &["0.9.0"], &["1.0.0"]),
        (">=1.0.0-beta.x", &["1.0.0-beta.0", "1.0.0-beta.1"], &["1.0.0-beta"]),
        ("1.x.x", &["1.0.0", "1.0.9"], &["1.1.0"]),
        ("~1.2.x", &["1.2.0"], &["1.2.1"]),
        ("^1.x", &["1.0.0"], &["1.5.0"]),
        ("xyz1.0.0", &["1.0.0"], &["1.0.1"]),
        ("<=1.+5.x", &["1.5.9"], &["1.6.0"]),
        ("! 1.0.0", &["1.0.0"], &["1.0.1"]),
        (">=1.0.0 5", &["1.0.0", "5.0.0"], &["0.9.0"]),
        ("1.0.0 - 2.0.0", &[], &["1.0.0", "1.5.0", "2.0.0"]),
        ("  1.0.0  ", &["1.0.0"], &["1.0.1"]),
        (">=\t1.0.0", &["1.0.0"], &["0.9.9"]),
    ];
    #[rustfmt::skip]
    const ERRORS: &[&str] = &[
        "", " ", "x", "1", "||", "|| 1.0.0", "1.0.0 ||", ">=1.0", "1.0", "v1.0.0", "1.0.0,2.0.0",
        ">=1.0.0,<2.0.0", "~1.2.3", "^1.2.3", "1.2.X", "1.2.*", "*", "1.0.0||2.0.0",
        "1.0.0 ||2.0.0", "<=1.0.0-linux", ">1.0.0+x86", "=1.0.0-linux", "1.0.0-linux",
        "!=1.0.0-x", "1.x.3", "01.0.0", "1.0.0-01", ">=1.0.0-", "=>1.0.0", "=<1.0.0",
        "1.0.0 <> 2.0.0", ">=1.0.0 || || <1.0.0", "1.0.0.0", "1.0.0 2.0", "abc", "1.2.x-beta",
        "1.0.0-18446744073709551616", "1.0.0\t2.0.0", "x.x", ">= =1.0.0",
        "<=99999999999999999999.x", "²1.x", "٣.x", "1.0.0 é", ">=1.0.0\t",
    ];

    #[test]
    fn matches_upstream_table() {
        for (range, yes, no) in MATCHES {
            let parsed = r(range);
            for version in *yes {
                assert!(
                    parsed.matches(&v(version)),
                    "{range:?} should match {version}"
                );
            }
            for version in *no {
                assert!(
                    !parsed.matches(&v(version)),
                    "{range:?} should not match {version}"
                );
            }
        }
    }

    /// All rejected upstream too, except the two deliberate divergences at the end.
    #[test]
    fn rejects_what_upstream_rejects() {
        for input in ERRORS
            .iter()
            .chain(&[">=1.0.0 || || <1.0.0", "1.0.0 || 1 || 2.0.0", "²1.x"])
        {
            let err = Range::parse(input).expect_err(input);
            let prefix = format!("invalid version range {input:?}: ");
            assert!(err.to_string().starts_with(&prefix), "{err}");
        }
    }

    #[test]
    fn error_messages() {
        let msg = |s: &str| Range::parse(s).unwrap_err().to_string();
        assert_eq!(msg(""), r#"invalid version range "": range is empty"#);
        assert!(
            msg(">=1.0").contains(r#"could not parse version "1.0" in ">=1.0""#),
            "{}",
            msg(">=1.0")
        );
        assert!(msg("~1.2.3").contains(r#"could not parse comparator "~" in "~1.2.3""#));
        assert!(msg("|| 1.0.0").contains("first element in range is '||'"));
        assert!(msg("1.0.0 ||").contains("last element in range is '||'"));
        assert!(msg("1.0.0 || || 2.0.0").contains("empty alternative"));
        assert!(msg("<=1.0.0-linux").contains(r#"could not get version from string: "<""#));
    }

    /// Each pair means the same on a grid of releases and prereleases.
    #[test]
    fn documented_equivalences() {
        let pairs = [
            ("1.2.x", ">=1.2.0 <1.3.0"),
            ("=1.2.x", ">=1.2.0 <1.3.0"),
            ("==1.2.x", ">=1.2.0 <1.3.0"),
            ("1.x", ">=1.0.0 <2.0.0"),
            (">1.2.x", ">=1.3.0"),
            (">=1.2.x", ">=1.2.0"),
            ("<=1.x", "<2.0.0"),
            ("<=1.2.x", "<1.3.0"),
            ("<1.2.x", "<1.2.0"),
            (">1.x", ">=2.0.0"),
            ("!=1.x", "<1.0.0 >=2.0.0"),
            ("!1.2.x", "<1.2.0 >=1.3.0"),
            ("1.x.x", ">=1.0.0 <1.1.0"),
            ("~1.2.x", "=1.2.0"),
            ("^1.x", "1.0.0"),
            ("! 1.0.0", "1.0.0"),
            (">= 1.0.0  <  2.0.0", ">=1.0.0 <2.0.0"),
            ("!1.0.0", "!=1.0.0"),
            ("==1.0.0", "1.0.0"),
            (">=1.0.0 5", ">=1.0.0"),
            ("1.0.0 - 2.0.0", "1.0.0 2.0.0"),
            ("<=1.+5.x", "<1.6.0"),
            (">=1.0.0-beta.x", ">=1.0.0-beta.0"),
        ];
        let mut grid = Vec::new();
        for major in 0..4 {
            for minor in 0..5 {
                for patch in 0..4 {
                    for pre in ["", "-0", "-rc.1", "-beta.0"] {
                        grid.push(v(&format!("{major}.{minor}.{patch}{pre}")));
                    }
                }
            }
        }
        for (a, b) in pairs {
            let (ra, rb) = (r(a), r(b));
            for version in &grid {
                assert_eq!(
                    ra.matches(version),
                    rb.matches(version),
                    "{a:?} vs {b:?} on {version}"
                );
            }
        }
    }

    #[test]
    fn prereleases_use_plain_precedence() {
        let range = r(">=1.0.0 <2.0.0");
        for yes in ["1.5.0-alpha", "2.0.0-rc.1", "1.0.0+build"] {
            assert!(range.matches(&v(yes)), "{yes}");
        }
        assert!(!range.matches(&v("1.0.0-rc.1")));
    }

    #[test]
    fn display_and_from_str_keep_the_original_text() {
        for text in [">= 1.0.0 <2.0.0", "1.x || 3.0.0", "  1.0.0  "] {
            let parsed: Range = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.as_str(), text);
            assert_eq!(r(&parsed.to_string()), parsed);
        }
    }

    #[test]
    fn long_and_odd_inputs_do_not_panic() {
        let long = ">=1.0.0 ".repeat(3000);
        assert!(r(&long).matches(&v("1.0.0")));
        for odd in [
            "\u{0}",
            "1.x\u{300}",
            "ü.x",
            "x.1.x",
            "1.99999999999999999999.x",
            "<=9223372036854775807.x",
            "<=1.9223372036854775807.x",
            "-1.x",
            ".x",
            "1..x",
            "1.x.x.x",
            "==x",
            "!x1",
        ] {
            let _ = Range::parse(odd);
        }
    }
}
