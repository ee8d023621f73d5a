use serde_json::json;

use super::*;

/// A CSV supporting exactly `modes`.
fn csv(modes: &[&str]) -> Csv {
    let install_modes: Vec<_> = MODES
        .iter()
        .map(|m| json!({"type": m, "supported": modes.contains(m)}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "x.v1"},
        "spec": {"installModes": install_modes, "install": {"strategy": "deployment", "spec": {}}},
    }))
    .unwrap()
}

fn asked(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

const ALL: &str = "AllNamespaces";
const OWN: &str = "OwnNamespace";
const SINGLE: &str = "SingleNamespace";
const MULTI: &str = "MultiNamespace";

#[test]
fn nothing_asked_is_all_namespaces_else_own_namespace_else_a_refusal_saying_what_to_name() {
    assert_eq!(decide(&csv(&[ALL, OWN]), "ops", None), Ok(Mode::All));
    assert_eq!(decide(&csv(&[ALL]), "ops", Some(&[])), Ok(Mode::All));
    assert_eq!(
        decide(&csv(&[OWN, SINGLE]), "ops", None),
        Ok(Mode::Own("ops".into()))
    );
    let refused = decide(&csv(&[SINGLE, MULTI]), "ops", None).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "no install mode to default to: this bundle's ClusterServiceVersion supports \
         SingleNamespace, MultiNamespace, neither AllNamespaces nor OwnNamespace; name the \
         namespaces it watches (watchNamespace, or targetNamespaces for several)"
    );
    assert!(
        decide(&csv(&[]), "ops", None)
            .unwrap_err()
            .to_string()
            .contains("supports none")
    );
}

#[test]
fn the_namespaces_asked_make_the_mode() {
    let every = csv(&[ALL, OWN, SINGLE, MULTI]);
    let cases: [(&[&str], Mode); 5] = [
        (&[""], Mode::All),
        (&["ops"], Mode::Own("ops".into())),
        (&["team-a"], Mode::Single("team-a".into())),
        // Sorted and without repeats, as OLM v0 writes olm.targetNamespaces.
        (
            &["team-b", "team-a", "team-b"],
            Mode::Multi(vec!["team-a".into(), "team-b".into()]),
        ),
        (
            &["ops", "team-a"],
            Mode::Multi(vec!["ops".into(), "team-a".into()]),
        ),
    ];
    for (list, mode) in cases {
        assert_eq!(
            decide(&every, "ops", Some(&asked(list))),
            Ok(mode),
            "{list:?}"
        );
    }
    let multi = Mode::Multi(vec!["a".into(), "b".into()]);
    assert_eq!(multi.annotation(), "a,b");
    assert_eq!(multi.targets(), ["a", "b"]);
    assert_eq!(Mode::All.annotation(), "");
    assert_eq!(Mode::Own("ops".into()).annotation(), "ops");
}

#[test]
fn a_mode_the_csv_does_not_declare_is_refused_naming_it_and_what_it_supports() {
    let refused = |modes: &[&str], list: &[&str]| {
        decide(&csv(modes), "ops", Some(&asked(list)))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(&[OWN, SINGLE], &[""]),
        "unsupported install mode: AllNamespaces (watching all namespaces) is not supported by \
         this bundle's ClusterServiceVersion (it supports OwnNamespace, SingleNamespace)"
    );
    // The install namespace alone is OwnNamespace, even when SingleNamespace is supported.
    assert_eq!(
        refused(&[SINGLE, ALL], &["ops"]),
        "unsupported install mode: OwnNamespace (watching its install namespace \"ops\") is not \
         supported by this bundle's ClusterServiceVersion (it supports SingleNamespace, AllNamespaces)"
    );
    assert_eq!(
        refused(&[OWN, ALL], &["team-a"]),
        "unsupported install mode: SingleNamespace (watching \"team-a\") is not supported by \
         this bundle's ClusterServiceVersion (it supports OwnNamespace, AllNamespaces)"
    );
    assert_eq!(
        refused(&[OWN, SINGLE, ALL], &["a", "b"]),
        "unsupported install mode: MultiNamespace (watching \"a\", \"b\") is not supported by \
         this bundle's ClusterServiceVersion (it supports OwnNamespace, SingleNamespace, AllNamespaces)"
    );
    assert_eq!(
        refused(&[MULTI], &["ops", "b"]),
        "unsupported install mode: watching the install namespace \"ops\" among others (\"b\", \
         \"ops\") needs OwnNamespace as well as MultiNamespace; this bundle's \
         ClusterServiceVersion supports MultiNamespace"
    );
    assert_eq!(
        refused(&[ALL, MULTI], &["", "b"]),
        "all namespaces (\"\") cannot be watched together with other namespaces (\"b\"): name \
         them or all, not both"
    );
}
