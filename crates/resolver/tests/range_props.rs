//! Property tests for the two version-range dialects (`olm_resolver::range`).

use std::cmp::Ordering;

use olm_resolver::range::{Constraint, Range, parse_bundle_version};
use proptest::prelude::*;
use semver::Version;

/// Small numbers so that generated versions often collide with the ranges' bounds.
fn version() -> impl Strategy<Value = Version> {
    let pre = prop::sample::select(vec![
        "", "0", "1", "alpha", "alpha.1", "beta.2", "rc.1", "rc.11",
    ]);
    let build = prop::sample::select(vec!["", "b1", "sha.5"]);
    let parts = (0u64..4, 0u64..4, 0u64..4, pre, build);
    parts.prop_filter_map("always valid", |(major, minor, patch, pre, build)| {
        let mut text = format!("{major}.{minor}.{patch}");
        if !pre.is_empty() {
            text += &format!("-{pre}");
        }
        if !build.is_empty() {
            text += &format!("+{build}");
        }
        parse_bundle_version(&text).ok()
    })
}

fn release() -> impl Strategy<Value = Version> {
    (0u64..4, 0u64..4, 0u64..4).prop_map(|(a, b, c)| Version::new(a, b, c))
}

const OPS: [&str; 6] = ["<", "<=", ">", ">=", "=", "!="];

fn holds(op: &str, ord: Ordering) -> bool {
    match op {
        "<" => ord.is_lt(),
        "<=" => ord.is_le(),
        ">" => ord.is_gt(),
        ">=" => ord.is_ge(),
        "=" => ord.is_eq(),
        _ => ord.is_ne(),
    }
}

/// A single comparator with a full version, valid in both dialects.
fn comparator() -> impl Strategy<Value = String> {
    (prop::sample::select(OPS.to_vec()), version()).prop_map(|(op, v)| format!("{op}{v}"))
}

/// An AND of comparators, space-separated (valid in both dialects).
fn and_group() -> impl Strategy<Value = String> {
    prop::collection::vec(comparator(), 1..4).prop_map(|terms| terms.join(" "))
}

proptest! {
    #[test]
    fn parsers_never_panic_on_arbitrary_text(s in any::<String>()) {
        let _ = Constraint::parse(&s);
        let _ = Range::parse(&s);
        let _ = parse_bundle_version(&s);
    }

    #[test]
    fn parsers_never_panic_on_range_like_text(s in "[0-9xX*.|,<>=!~^v+ \t-]{0,40}", v in version()) {
        if let Ok(c) = Constraint::parse(&s) {
            let _ = c.matches(&v);
            prop_assert_eq!(c.to_string(), s.clone());
        }
        if let Ok(r) = Range::parse(&s) {
            let _ = r.matches(&v);
            prop_assert_eq!(r.to_string(), s.clone());
        }
    }

    /// Masterminds: a comparator on a release matches exactly the releases on that side;
    /// no prerelease ever matches (except the exact `!=`, which has no prerelease check).
    #[test]
    fn masterminds_comparator_on_a_release(op in prop::sample::select(OPS.to_vec()), a in release(), v in version()) {
        let c = Constraint::parse(&format!("{op}{a}")).unwrap();
        let expected = (v.pre.is_empty() || op == "!=") && holds(op, v.cmp_precedence(&a));
        prop_assert_eq!(c.matches(&v), expected, "{}{} on {}", op, a, v);
    }

    /// Masterminds: with a prerelease in the comparator, plain precedence applies.
    #[test]
    fn masterminds_comparator_on_a_prerelease(op in prop::sample::select(OPS.to_vec()), a in version(), v in version()) {
        prop_assume!(!a.pre.is_empty());
        let c = Constraint::parse(&format!("{op}{a}")).unwrap();
        prop_assert_eq!(c.matches(&v), holds(op, v.cmp_precedence(&a)), "{}{} on {}", op, a, v);
    }

    /// Masterminds: a bare full version matches only versions equal to it, build ignored.
    #[test]
    fn masterminds_plain_version_is_exact(a in version(), v in version()) {
        let c = Constraint::parse(&a.to_string()).unwrap();
        prop_assert_eq!(c.matches(&v), v.cmp_precedence(&a).is_eq());
    }

    #[test]
    fn masterminds_wildcards_tilde_caret_on_releases(a in release(), v in version()) {
        let (m, n, p) = (a.major, a.minor, a.patch);
        let rel = v.pre.is_empty();
        let at_least = v.cmp_precedence(&a).is_ge();
        let cases = [
            (format!("{m}.{n}.x"), rel && v.major == m && v.minor == n),
            (format!("{m}.{n}"), rel && v.major == m && v.minor == n),
            (format!("{m}.x"), rel && v.major == m),
            (format!("{m}"), rel && v.major == m),
            (format!(">{m}.{n}"), rel && (v.major, v.minor) > (m, n)),
            (format!("<={m}.{n}"), rel && (v.major, v.minor) <= (m, n)),
            // Upstream's special case: `~0.0.0` matches every release.
            (format!("~{m}.{n}.{p}"), rel && ((m, n, p) == (0, 0, 0) || (at_least && v.major == m && v.minor == n))),
            (format!("^{m}.{n}.{p}"), rel && at_least && match (m, n) {
                (0, 0) => (v.major, v.minor, v.patch) == (0, 0, p),
                (0, _) => (v.major, v.minor) == (0, n),
                _ => v.major == m,
            }),
        ];
        for (text, expected) in cases {
            let c = Constraint::parse(&text).unwrap();
            prop_assert_eq!(c.matches(&v), expected, "{} on {}", text, v);
        }
    }

    #[test]
    fn masterminds_hyphen_range_is_inclusive(a in release(), b in release(), v in version()) {
        let hyphen = Constraint::parse(&format!("{a} - {b}")).unwrap();
        let spelled = Constraint::parse(&format!(">={a}, <={b}")).unwrap();
        prop_assert_eq!(hyphen.matches(&v), spelled.matches(&v));
    }

    #[test]
    fn masterminds_or_and(x in and_group(), y in and_group(), v in version()) {
        let (cx, cy) = (Constraint::parse(&x).unwrap(), Constraint::parse(&y).unwrap());
        let or = Constraint::parse(&format!("{x} || {y}")).unwrap();
        prop_assert_eq!(or.matches(&v), cx.matches(&v) || cy.matches(&v));
        for sep in [" ", ", ", ","] {
            let and = Constraint::parse(&format!("{x}{sep}{y}")).unwrap();
            prop_assert_eq!(and.matches(&v), cx.matches(&v) && cy.matches(&v));
        }
    }

    /// blang: every comparator is plain semver precedence, prereleases included.
    #[test]
    fn blang_comparator(op in prop::sample::select(OPS.to_vec()), a in version(), v in version(), space in any::<bool>()) {
        let text = format!("{op}{}{a}", if space { " " } else { "" });
        let r = Range::parse(&text).unwrap();
        prop_assert_eq!(r.matches(&v), holds(op, v.cmp_precedence(&a)), "{} on {}", text, v);
    }

    #[test]
    fn blang_wildcards(a in release(), v in version()) {
        let (m, n) = (a.major, a.minor);
        let in_minor = v.cmp_precedence(&Version::new(m, n, 0)).is_ge()
            && v.cmp_precedence(&Version::new(m, n + 1, 0)).is_lt();
        let in_major = v.cmp_precedence(&Version::new(m, 0, 0)).is_ge()
            && v.cmp_precedence(&Version::new(m + 1, 0, 0)).is_lt();
        prop_assert_eq!(Range::parse(&format!("{m}.{n}.x")).unwrap().matches(&v), in_minor);
        prop_assert_eq!(Range::parse(&format!("{m}.x")).unwrap().matches(&v), in_major);
        let not_major = Range::parse(&format!("!={m}.x")).unwrap();
        prop_assert!(!not_major.matches(&v));
    }

    #[test]
    fn blang_or_and(x in and_group(), y in and_group(), v in version()) {
        let (rx, ry) = (Range::parse(&x).unwrap(), Range::parse(&y).unwrap());
        let or = Range::parse(&format!("{x} || {y}")).unwrap();
        prop_assert_eq!(or.matches(&v), rx.matches(&v) || ry.matches(&v));
        let and = Range::parse(&format!("{x} {y}")).unwrap();
        prop_assert_eq!(and.matches(&v), rx.matches(&v) && ry.matches(&v));
    }

    #[test]
    fn display_round_trips(x in and_group(), y in and_group()) {
        let text = format!("{x} || {y}");
        let c = Constraint::parse(&text).unwrap();
        prop_assert_eq!(Constraint::parse(&c.to_string()).unwrap(), c.clone());
        prop_assert_eq!(c.to_string(), text.clone());
        let r = Range::parse(&text).unwrap();
        prop_assert_eq!(Range::parse(&r.to_string()).unwrap(), r.clone());
        prop_assert_eq!(r.to_string(), text);
    }

    #[test]
    fn bundle_versions_round_trip(v in version()) {
        prop_assert_eq!(parse_bundle_version(&v.to_string()).unwrap(), v.clone());
        let prefixed = format!("v{v}");
        prop_assert!(parse_bundle_version(&prefixed).is_err());
    }
}
