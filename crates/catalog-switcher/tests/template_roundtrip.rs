//! Property tests of the template language: any template, written canonically, parses back to
//! itself; and any text that parses, written canonically, parses to the same template.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use catalog_switcher::template::{KubeVar, ObjectRef, ObjectVar, Part, Target, Template, parse};
use proptest::prelude::*;

fn literal() -> impl Strategy<Value = String> {
    // Anything but braces, which would be variables, and no trailing space (the parser
    // drops a template's trailing whitespace).
    "[a-zA-Z0-9./:@_-]([a-zA-Z0-9./:@_ -]{0,10}[a-zA-Z0-9./:@_-])?"
}

fn name() -> impl Strategy<Value = String> {
    "[a-z]([a-z0-9-]{0,8}[a-z0-9])?"
}

fn jsonpath() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}(\\.[a-z]{1,6}){0,3}",
        "\\.[a-z]{1,6}(\\.[a-z]{1,6}){0,3}",
        "\\{\\.[a-z]{1,6}(\\.[a-z]{1,6}){0,2}\\}",
        "\\$\\.[a-z]{1,6}(\\.[a-z]{1,6}){0,2}",
        "[a-z]{1,6}\\[[0-9]\\]",
    ]
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        literal().prop_map(Part::Literal),
        prop_oneof![
            Just(KubeVar::Major),
            Just(KubeVar::Minor),
            Just(KubeVar::Patch)
        ]
        .prop_map(Part::Kube),
        jsonpath().prop_map(|jsonpath| Part::Object(ObjectVar {
            target: Target::Itself,
            jsonpath
        })),
        (
            prop_oneof![Just(String::new()), "[a-z]{1,8}\\.io"],
            "v[0-9](alpha[0-9])?",
            "[A-Z][a-zA-Z]{0,8}",
            name(),
            proptest::option::of(name()),
            jsonpath()
        )
            .prop_map(|(group, version, kind, name, namespace, jsonpath)| {
                Part::Object(ObjectVar {
                    target: Target::Other(ObjectRef {
                        group,
                        version,
                        kind,
                        name,
                        namespace,
                    }),
                    jsonpath,
                })
            }),
    ]
}

/// Adjacent literals merge when parsed: a generated template has none.
fn template() -> impl Strategy<Value = Template> {
    proptest::collection::vec(part(), 0..6).prop_map(|parts| {
        let mut merged: Vec<Part> = Vec::new();
        for p in parts {
            match (merged.last_mut(), p) {
                (Some(Part::Literal(a)), Part::Literal(b)) => a.push_str(&b),
                (_, p) => merged.push(p),
            }
        }
        Template { parts: merged }
    })
}

proptest! {
    #[test]
    fn a_template_written_canonically_parses_back(t in template()) {
        let text = t.to_string();
        prop_assert_eq!(parse(&text).unwrap(), t, "{}", text);
    }

    #[test]
    fn parsing_is_stable_under_canonical_writing(text in "[a-z{}:,.$ _-]{0,40}") {
        if let Ok(t) = parse(&text) {
            prop_assert_eq!(parse(&t.to_string()).unwrap(), t);
        }
    }

    #[test]
    fn errors_point_inside_the_text(text in "\\PC{0,40}") {
        if let Err(e) = parse(&text) {
            prop_assert!(e.column >= 1 && e.column <= text.chars().count() + 1, "{} in {:?}", e, text);
        }
    }
}
