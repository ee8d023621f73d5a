//! Resolution semantics: filters, upgrade edges, dependencies, GVK uniqueness, preference, ties,
//! and explanations of unsatisfiable problems.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::sync::Arc;

use olm_resolver::fbc::load_files;
use olm_resolver::fbc::validate::validate;
use olm_resolver::resolve::{
    CatalogInput, Deprecated, Index, Installed, LabelSelector, Request, ResolveError,
    UpgradeConstraintPolicy, groups, resolve, resolve_each,
};

/// A bundle blob. `extra` is more YAML list items for its properties.
fn bundle(package: &str, version: &str, extra: &str) -> String {
    format!(
        "---\nschema: olm.bundle\npackage: {package}\nname: {package}.v{version}\nimage: example.com/{package}:v{version}\nproperties:\n- type: olm.package\n  value: {{packageName: {package}, version: {version}}}\n{extra}"
    )
}

fn package(name: &str, channel: &str) -> String {
    format!("---\nschema: olm.package\nname: {name}\ndefaultChannel: {channel}\n")
}

/// A channel; `entries` is YAML list items.
fn channel(package: &str, name: &str, entries: &str) -> String {
    format!("---\nschema: olm.channel\npackage: {package}\nname: {name}\nentries:\n{entries}")
}

fn requires_package(package: &str, range: &str) -> String {
    format!(
        "- type: olm.package.required\n  value: {{packageName: {package}, versionRange: '{range}'}}\n"
    )
}

fn gvk(kind: &str, required: bool) -> String {
    let t = if required {
        "olm.gvk.required"
    } else {
        "olm.gvk"
    };
    format!("- type: {t}\n  value: {{group: example.com, version: v1, kind: {kind}}}\n")
}

fn catalog(name: &str, priority: i32, labels: &[(&str, &str)], text: &str) -> CatalogInput {
    let fbc = load_files([(format!("{name}.yaml"), text.as_bytes())]).unwrap();
    let problems = validate(&fbc);
    assert!(
        problems.is_empty(),
        "test catalog {name} is invalid: {problems:#?}"
    );
    CatalogInput {
        name: name.into(),
        priority,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        fbc: Arc::new(fbc),
    }
}

fn req(package: &str) -> Request {
    Request {
        package_name: package.into(),
        ..Default::default()
    }
}

fn resolve_names(
    catalogs: &[CatalogInput],
    requests: &[Request],
    installed: &[Installed],
) -> Vec<String> {
    let index = Index::build(catalogs);
    match resolve(&index, requests, installed) {
        Ok(r) => r
            .into_iter()
            .map(|b| format!("{}@{}", b.name, b.catalog))
            .collect(),
        Err(e) => panic!("unexpected failure: {:#?}", e.sentences()),
    }
}

fn explain(catalogs: &[CatalogInput], requests: &[Request], installed: &[Installed]) -> String {
    let index = Index::build(catalogs);
    match resolve(&index, requests, installed) {
        Ok(r) => panic!("unexpectedly resolved: {r:?}"),
        Err(ResolveError::Unsatisfiable(s)) | Err(ResolveError::Ambiguous(s)) => {
            let text = s.join("\n");
            println!("{text}");
            text
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// foo: 1.0.0 <- 1.1.0 (replaces) <- 1.2.0 (replaces); 1.3.0 skips 1.0.0; 2.0.0 has skipRange
/// >=1.1.0 <2.0.0 and replaces 1.3.0. Channels: stable (all), fast (only 2.0.0 ... 1.3.0).
fn upgrade_catalog() -> CatalogInput {
    let text = [
        package("foo", "stable"),
        channel(
            "foo",
            "stable",
            "- name: foo.v1.0.0\n- name: foo.v1.1.0\n  replaces: foo.v1.0.0\n- name: foo.v1.2.0\n  replaces: foo.v1.1.0\n- name: foo.v1.3.0\n  replaces: foo.v1.2.0\n  skips: [foo.v1.0.0]\n- name: foo.v2.0.0\n  replaces: foo.v1.3.0\n  skipRange: '>=1.1.0 <2.0.0'\n",
        ),
        bundle("foo", "1.0.0", ""),
        bundle("foo", "1.1.0", ""),
        bundle("foo", "1.2.0", ""),
        bundle("foo", "1.3.0", ""),
        bundle("foo", "2.0.0", ""),
    ]
    .concat();
    catalog("community", 0, &[], &text)
}

fn installed(bundle: &str) -> Vec<Installed> {
    vec![Installed {
        package_name: "foo".into(),
        bundle: bundle.into(),
        version: None,
    }]
}

#[test]
fn the_highest_version_in_range_and_channel_wins() {
    let c = [upgrade_catalog()];
    assert_eq!(
        resolve_names(&c, &[req("foo")], &[]),
        ["foo.v2.0.0@community"]
    );
    let ranged = Request {
        version: Some(">=1.1.0 <1.3.0".into()),
        ..req("foo")
    };
    assert_eq!(resolve_names(&c, &[ranged], &[]), ["foo.v1.2.0@community"]);
    let exact = Request {
        version: Some("1.1.0".into()),
        ..req("foo")
    };
    assert_eq!(resolve_names(&c, &[exact], &[]), ["foo.v1.1.0@community"]);
}

#[test]
fn under_enforce_only_successors_by_replaces_skips_or_skip_range_are_chosen() {
    let c = [upgrade_catalog()];
    // From 1.0.0: 1.1.0 (replaces) and 1.3.0 (skips) are successors; 1.2.0 and 2.0.0 are not
    // (2.0.0's skipRange starts at 1.1.0).
    let below_2 = Request {
        version: Some("<2.0.0".into()),
        ..req("foo")
    };
    assert_eq!(
        resolve_names(&c, std::slice::from_ref(&below_2), &installed("foo.v1.0.0")),
        ["foo.v1.3.0@community"]
    );
    let below_13 = Request {
        version: Some("<1.3.0".into()),
        ..req("foo")
    };
    assert_eq!(
        resolve_names(&c, &[below_13], &installed("foo.v1.0.0")),
        ["foo.v1.1.0@community"]
    );
    assert_eq!(
        resolve_names(&c, &[req("foo")], &installed("foo.v1.0.0")),
        ["foo.v1.3.0@community"]
    );
    // From 1.1.0: 1.2.0 (replaces) and 2.0.0 (skipRange contains 1.1.0).
    assert_eq!(
        resolve_names(&c, &[req("foo")], &installed("foo.v1.1.0")),
        ["foo.v2.0.0@community"]
    );
    assert_eq!(
        resolve_names(&c, &[below_2], &installed("foo.v1.1.0")),
        ["foo.v1.2.0@community"]
    );
}

#[test]
fn staying_on_the_installed_bundle_is_always_allowed() {
    let c = [upgrade_catalog()];
    let pinned = Request {
        version: Some("1.2.0".into()),
        ..req("foo")
    };
    assert_eq!(
        resolve_names(&c, &[pinned], &installed("foo.v1.2.0")),
        ["foo.v1.2.0@community"]
    );
}

#[test]
fn under_ignore_any_version_up_or_down_is_allowed() {
    let c = [upgrade_catalog()];
    let ignore = |v: &str| Request {
        version: Some(v.into()),
        upgrade_constraint_policy: UpgradeConstraintPolicy::Ignore,
        ..req("foo")
    };
    assert_eq!(
        resolve_names(&c, &[ignore("1.2.0")], &installed("foo.v1.0.0")),
        ["foo.v1.2.0@community"]
    );
    assert_eq!(
        resolve_names(&c, &[ignore("1.0.0")], &installed("foo.v2.0.0")),
        ["foo.v1.0.0@community"]
    );
}

#[test]
fn a_blocked_upgrade_is_explained_with_the_way_out() {
    let c = [upgrade_catalog()];
    let to_12 = Request {
        version: Some("1.2.0".into()),
        ..req("foo")
    };
    let text = explain(&c, &[to_12], &installed("foo.v1.0.0"));
    assert!(
        text.contains("foo.v1.0.0 is installed and upgradeConstraintPolicy is Enforce"),
        "{text}"
    );
    assert!(
        text.contains("its successors are foo.v1.3.0 and foo.v1.1.0"),
        "{text}"
    );
    assert!(
        text.contains("Set upgradeConstraintPolicy to Ignore"),
        "{text}"
    );
}

#[test]
fn missing_packages_channels_and_versions_are_explained() {
    let c = [upgrade_catalog()];
    let text = explain(&c, &[req("nope")], &[]);
    assert!(
        text.contains("no catalog has a package named \"nope\""),
        "{text}"
    );
    let text = explain(
        &c,
        &[Request {
            channel: Some("beta".into()),
            ..req("foo")
        }],
        &[],
    );
    assert!(
        text.contains("package \"foo\" has no channel \"beta\"; its channels are \"stable\""),
        "{text}"
    );
    let text = explain(
        &c,
        &[Request {
            version: Some(">=3.0.0".into()),
            ..req("foo")
        }],
        &[],
    );
    assert!(text.contains("has a version in \">=3.0.0\"; the versions there are 1.0.0, 1.1.0, 1.2.0, 1.3.0 and 2.0.0"), "{text}");
}

fn deps_catalog() -> CatalogInput {
    let text = [
        package("foo", "stable"),
        channel("foo", "stable", "- name: foo.v1.0.0\n- name: foo.v2.0.0\n  replaces: foo.v1.0.0\n"),
        bundle("foo", "1.0.0", &requires_package("bar", ">=1.0.0 <2.0.0")),
        bundle("foo", "2.0.0", &requires_package("bar", ">=2.0.0")),
        package("bar", "stable"),
        channel("bar", "stable", "- name: bar.v1.0.0\n- name: bar.v1.5.0\n  replaces: bar.v1.0.0\n- name: bar.v2.0.0\n  replaces: bar.v1.5.0\n"),
        bundle("bar", "1.0.0", ""),
        bundle("bar", "1.5.0", ""),
        bundle("bar", "2.0.0", ""),
    ]
    .concat();
    catalog("community", 0, &[], &text)
}

#[test]
fn dependencies_decide_between_candidates() {
    let c = [deps_catalog()];
    assert_eq!(
        resolve_names(&c, &[req("foo"), req("bar")], &[]),
        ["foo.v2.0.0@community", "bar.v2.0.0@community"]
    );
    let old_bar = Request {
        version: Some("<2.0.0".into()),
        ..req("bar")
    };
    assert_eq!(
        resolve_names(&c, &[req("foo"), old_bar], &[]),
        ["foo.v1.0.0@community", "bar.v1.5.0@community"]
    );
}

#[test]
fn a_dependency_on_an_unrequested_package_is_explained() {
    let c = [deps_catalog()];
    let text = explain(&c, &[req("foo")], &[]);
    assert!(
        text.contains("Request \"foo\" cannot be satisfied by itself."),
        "{text}"
    );
    assert!(
        text.contains("requires package \"bar\" (>=2.0.0), but no request asks for \"bar\""),
        "{text}"
    );
}

#[test]
fn conflicting_requests_are_named_and_explained() {
    let c = [
        deps_catalog(),
        catalog(
            "other",
            0,
            &[],
            &[
                package("baz", "stable"),
                channel("baz", "stable", "- name: baz.v1.0.0\n"),
                bundle("baz", "1.0.0", ""),
            ]
            .concat(),
        ),
    ];
    let new_foo = Request {
        version: Some(">=2.0.0".into()),
        ..req("foo")
    };
    let old_bar = Request {
        version: Some("<2.0.0".into()),
        ..req("bar")
    };
    // baz is fine on its own: the explanation names only foo and bar.
    let text = explain(&c, &[req("baz"), new_foo, old_bar], &[]);
    assert!(
        text.contains("Requests \"foo\" and \"bar\" cannot all be satisfied together"),
        "{text}"
    );
    assert!(!text.contains("\"baz\""), "{text}");
    assert!(
        text.contains("foo.v2.0.0 requires package \"bar\" (>=2.0.0), but the request for \"bar\" allows only versions 1.0.0 and 1.5.0"),
        "{text}"
    );
}

fn gvk_catalog() -> CatalogInput {
    let text = [
        package("foo", "stable"),
        channel(
            "foo",
            "stable",
            "- name: foo.v1.0.0\n- name: foo.v2.0.0\n  replaces: foo.v1.0.0\n",
        ),
        bundle("foo", "1.0.0", ""),
        bundle("foo", "2.0.0", &gvk("Widget", false)),
        package("baz", "stable"),
        channel("baz", "stable", "- name: baz.v1.0.0\n"),
        bundle("baz", "1.0.0", &gvk("Widget", false)),
        package("app", "stable"),
        channel("app", "stable", "- name: app.v1.0.0\n"),
        bundle("app", "1.0.0", &gvk("Gadget", true)),
        package("gadgets", "stable"),
        channel("gadgets", "stable", "- name: gadgets.v1.0.0\n"),
        bundle("gadgets", "1.0.0", &gvk("Gadget", false)),
    ]
    .concat();
    catalog("community", 0, &[], &text)
}

#[test]
fn at_most_one_bundle_provides_a_gvk() {
    let c = [gvk_catalog()];
    assert_eq!(
        resolve_names(&c, &[req("foo")], &[]),
        ["foo.v2.0.0@community"]
    );
    assert_eq!(
        resolve_names(&c, &[req("foo"), req("baz")], &[]),
        ["foo.v1.0.0@community", "baz.v1.0.0@community"]
    );
    let new_foo = Request {
        version: Some("2.0.0".into()),
        ..req("foo")
    };
    let text = explain(&c, &[new_foo, req("baz")], &[]);
    assert!(
        text.contains(
            "provides API example.com/v1 Widget, as does every bundle the request \"baz\" allows"
        ),
        "{text}"
    );
}

#[test]
fn a_required_gvk_is_satisfied_by_another_requests_bundle() {
    let c = [gvk_catalog()];
    assert_eq!(
        resolve_names(&c, &[req("app"), req("gadgets")], &[]),
        ["app.v1.0.0@community", "gadgets.v1.0.0@community"]
    );
    let text = explain(&c, &[req("app")], &[]);
    assert!(text.contains("requires API example.com/v1 Gadget, which only packages no request asks for provide (\"gadgets\")"), "{text}");
}

#[test]
fn deprecated_bundles_are_chosen_last() {
    let text = [
        package("foo", "stable"),
        channel("foo", "stable", "- name: foo.v1.0.0\n- name: foo.v2.0.0\n  replaces: foo.v1.0.0\n"),
        bundle("foo", "1.0.0", ""),
        bundle("foo", "2.0.0", ""),
        "---\nschema: olm.deprecations\npackage: foo\nentries:\n- reference: {schema: olm.bundle, name: foo.v2.0.0}\n  message: broken, use 1.0.0\n".to_owned(),
    ]
    .concat();
    let c = [catalog("community", 0, &[], &text)];
    assert_eq!(
        resolve_names(&c, &[req("foo")], &[]),
        ["foo.v1.0.0@community"]
    );
    let only_2 = Request {
        version: Some("2.0.0".into()),
        ..req("foo")
    };
    assert_eq!(resolve_names(&c, &[only_2], &[]), ["foo.v2.0.0@community"]);
}

fn simple(name: &str, priority: i32, labels: &[(&str, &str)]) -> CatalogInput {
    let text = [
        package("foo", "stable"),
        channel("foo", "stable", "- name: foo.v1.0.0\n"),
        bundle("foo", "1.0.0", ""),
    ]
    .concat();
    catalog(name, priority, labels, &text)
}

#[test]
fn catalog_priority_breaks_ties_and_an_unbreakable_tie_names_the_catalogs() {
    let c = [simple("a", 0, &[]), simple("b", 10, &[])];
    assert_eq!(resolve_names(&c, &[req("foo")], &[]), ["foo.v1.0.0@b"]);
    let c = [simple("a", 5, &[]), simple("b", 5, &[])];
    let text = explain(&c, &[req("foo")], &[]);
    assert!(
        text.contains("offered by catalogs \"a\" and \"b\" with the same priority (5)"),
        "{text}"
    );
}

#[test]
fn the_catalog_selector_limits_the_catalogs() {
    let c = [
        simple("a", 0, &[("tier", "community")]),
        simple("b", 0, &[("tier", "certified")]),
    ];
    let selector = LabelSelector {
        match_labels: [("tier".to_owned(), "certified".to_owned())].into(),
        ..Default::default()
    };
    let r = Request {
        catalog_selector: Some(selector),
        ..req("foo")
    };
    assert_eq!(resolve_names(&c, &[r], &[]), ["foo.v1.0.0@b"]);
    let none = LabelSelector {
        match_labels: [("tier".to_owned(), "gold".to_owned())].into(),
        ..Default::default()
    };
    let text = explain(
        &c,
        &[Request {
            catalog_selector: Some(none),
            ..req("foo")
        }],
        &[],
    );
    assert!(text.contains("its catalogSelector (tier=gold) matches no catalog that has package \"foo\"; the package is in catalogs a and b"), "{text}");
}

#[test]
fn an_invalid_version_range_is_an_invalid_request() {
    let index = Index::build(&[upgrade_catalog()]);
    let r = Request {
        version: Some(">=banana".into()),
        ..req("foo")
    };
    assert!(matches!(
        resolve(&index, &[r], &[]),
        Err(ResolveError::InvalidRequest(_))
    ));
}

#[test]
fn the_real_rabbitmq_catalogs_resolve_jointly_and_alloydb_does_not() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fbc-samples/real");
    let fbc = olm_resolver::fbc::load_path(&dir).unwrap();
    let c = [CatalogInput {
        name: "real".into(),
        priority: 0,
        labels: BTreeMap::new(),
        fbc: Arc::new(fbc),
    }];
    let names = resolve_names(
        &c,
        &[
            req("rabbitmq-messaging-topology-operator"),
            req("rabbitmq-cluster-operator"),
        ],
        &[],
    );
    assert_eq!(names.len(), 2);
    assert!(
        names[0].starts_with("rabbitmq-messaging-topology-operator.v"),
        "{names:?}"
    );
    // Alone, the newest version without the dependency (1.14.2) is chosen...
    let alone = resolve_names(&c, &[req("rabbitmq-messaging-topology-operator")], &[]);
    assert_eq!(alone, ["rabbitmq-messaging-topology-operator.v1.14.2@real"]);
    // ...and asking for a newer one explains what is missing.
    let newer = Request {
        version: Some(">=1.15.0".into()),
        ..req("rabbitmq-messaging-topology-operator")
    };
    let text = explain(&c, &[newer], &[]);
    assert!(
        text.contains("no request asks for \"rabbitmq-cluster-operator\""),
        "{text}"
    );
    let text = explain(&c, &[req("alloydb-omni-operator")], &[]);
    assert!(
        text.contains(
            "requires API cert-manager.io/v1 Certificate, which no bundle in the catalogs provides"
        ),
        "{text}"
    );
}

/// `name@catalog` per request, or `error: first sentence`.
fn each(catalogs: &[CatalogInput], requests: &[Request], installed: &[Installed]) -> Vec<String> {
    let index = Index::build(catalogs);
    resolve_each(&index, requests, installed)
        .into_iter()
        .map(|o| match o {
            Ok(b) => format!("{}@{}", b.name, b.catalog),
            Err(e) => format!("error: {}", e.sentences().join(" ")),
        })
        .collect()
}

#[test]
fn an_unsatisfiable_request_never_blocks_the_others() {
    let c = [
        deps_catalog(),
        catalog(
            "other",
            0,
            &[],
            &[
                package("baz", "stable"),
                channel("baz", "stable", "- name: baz.v1.0.0\n"),
                bundle("baz", "1.0.0", ""),
            ]
            .concat(),
        ),
    ];
    let new_foo = Request {
        version: Some(">=2.0.0".into()),
        ..req("foo")
    };
    let old_bar = Request {
        version: Some("<2.0.0".into()),
        ..req("bar")
    };
    let missing = req("nope");
    let bad_range = Request {
        version: Some(">=1 <<2".into()),
        ..req("baz")
    };
    let got = each(&c, &[req("baz"), new_foo, old_bar, missing, bad_range], &[]);
    assert_eq!(got[0], "baz.v1.0.0@other");
    // foo and bar conflict with each other: both fail, each with the same explanation.
    assert!(
        got[1].starts_with("error: Requests \"foo\" and \"bar\" cannot all be satisfied together"),
        "{got:?}"
    );
    assert_eq!(got[1], got[2]);
    assert!(
        got[3].contains("no catalog has a package named \"nope\""),
        "{got:?}"
    );
    assert!(got[4].contains("invalid version range"), "{got:?}");
    // The joint resolver refuses the whole problem.
    assert!(resolve(&Index::build(&c), &[req("baz"), req("nope")], &[]).is_err());
}

#[test]
fn after_a_conflict_is_set_aside_the_rest_resolve_as_if_it_were_absent() {
    // foo 2.0.0 and baz both provide Widget; with foo pinned to 2.0.0 they conflict. The bar
    // request, next to them, must still resolve.
    let c = [gvk_catalog(), deps_catalog_renamed()];
    let new_foo = Request {
        version: Some("2.0.0".into()),
        ..req("foo")
    };
    let got = each(&c, &[new_foo, req("baz"), req("app"), req("gadgets")], &[]);
    assert!(got[0].starts_with("error: Requests"), "{got:?}");
    assert_eq!(got[0], got[1]);
    assert_eq!(got[2], "app.v1.0.0@community");
    assert_eq!(got[3], "gadgets.v1.0.0@community");
}

/// A catalog with unrelated packages, so indexes hold more than one catalog.
fn deps_catalog_renamed() -> CatalogInput {
    catalog(
        "extra",
        0,
        &[],
        &[
            package("lone", "stable"),
            channel("lone", "stable", "- name: lone.v1.0.0\n"),
            bundle("lone", "1.0.0", ""),
        ]
        .concat(),
    )
}

#[test]
fn ties_fail_only_the_tied_request() {
    let c = [
        simple("a", 0, &[]),
        simple("b", 0, &[]),
        deps_catalog_renamed(),
    ];
    let got = each(&c, &[req("foo"), req("lone")], &[]);
    assert!(
        got[0].contains("offered by catalogs \"a\" and \"b\""),
        "{got:?}"
    );
    assert_eq!(got[1], "lone.v1.0.0@extra");
}

#[test]
fn groups_join_requests_that_share_a_package_or_an_api() {
    let c = [deps_catalog(), gvk_catalog(), deps_catalog_renamed()];
    let index = Index::build(&c);
    // foo (both catalogs) requires bar and provides Widget, as baz does; app requires Gadget,
    // which gadgets provides; lone is alone.
    let g = groups(
        &index,
        &["foo", "bar", "baz", "app", "gadgets", "lone", "foo"],
    );
    assert_eq!(g, [0, 0, 0, 1, 1, 2, 0]);
    let g = groups(&index, &["app", "lone", "nope"]);
    assert_eq!(g, [0, 1, 2]);
}

#[test]
fn deprecation_notices_name_the_package_the_requested_channel_and_the_bundle() {
    let text = [
        package("foo", "stable"),
        channel("foo", "stable", "- name: foo.v1.0.0\n"),
        channel("foo", "beta", "- name: foo.v1.0.0\n"),
        bundle("foo", "1.0.0", ""),
        "---\nschema: olm.deprecations\npackage: foo\nentries:\n- reference: {schema: olm.package}\n  message: foo is retired\n- reference: {schema: olm.channel, name: beta}\n  message: beta is gone\n- reference: {schema: olm.bundle, name: foo.v1.0.0}\n  message: 1.0.0 has a CVE\n".to_owned(),
    ]
    .concat();
    let index = Index::build(&[catalog("community", 0, &[], &text)]);
    let e = index.package_entries("foo")[0];
    let said = |ch: Option<&str>| -> Vec<(Deprecated, String)> {
        index
            .notices(e, ch)
            .into_iter()
            .map(|n| (n.what, n.message))
            .collect()
    };
    assert_eq!(
        said(Some("beta")),
        [
            (Deprecated::Package, "foo is retired".to_owned()),
            (Deprecated::Channel, "beta is gone".to_owned()),
            (Deprecated::Bundle, "1.0.0 has a CVE".to_owned()),
        ]
    );
    assert_eq!(said(Some("stable")).len(), 2);
    assert_eq!(said(None).len(), 2);
    assert!(index.contents[0].approx_bytes() > 0);
}

#[test]
fn a_dependency_on_a_failed_request_names_that_request() {
    // foo needs bar; the request for bar asks for a version that does not exist.
    let c = [deps_catalog()];
    let bad_bar = Request {
        name: Some("my-bar".into()),
        version: Some(">=9.0.0".into()),
        ..req("bar")
    };
    let got = each(&c, &[req("foo"), bad_bar], &[]);
    assert!(got[1].contains("no bundle of package \"bar\""), "{got:?}");
    assert!(
        got[0]
            .contains("but the request my-bar (package \"bar\") for it cannot be satisfied itself"),
        "{got:?}"
    );
    assert!(!got[0].contains("no request asks for"), "{got:?}");
}

#[test]
fn a_solve_past_its_deadline_decides_nothing() {
    let c = [deps_catalog()];
    let index = Index::build(&c);
    let past = std::time::Instant::now();
    let got = olm_resolver::resolve::resolve_each_within(
        &index,
        &[req("foo"), req("bar")],
        &[],
        Some(past),
    );
    assert!(
        got.iter()
            .all(|o| matches!(o, Err(ResolveError::TimedOut(_)))),
        "{got:?}"
    );
    // Requests that fail before any solve still say why.
    let got = olm_resolver::resolve::resolve_each_within(&index, &[req("nope")], &[], Some(past));
    assert!(
        matches!(&got[0], Err(ResolveError::Unsatisfiable(_))),
        "{got:?}"
    );
}
