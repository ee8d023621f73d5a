//! The cluster as a constraint on resolution: an API it serves without a BundleDeployment
//! satisfies `olm.gvk.required`; a bundle providing an API whose CRD another BundleDeployment
//! owns is not chosen, and the request's explanation says so; the request's own
//! BundleDeployment owning it is no obstacle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use olm_resolver::fbc::load_files;
use olm_resolver::fbc::property::Gvk;
use olm_resolver::resolve::{CatalogInput, ClusterApis, Index, Outcome, Request, resolve_each_on};

/// `app` requires Widget; `gadget-a` and `gadget-b` both provide Gadget (one version each).
const CATALOG: &str = r#"
{"schema": "olm.package", "name": "app", "defaultChannel": "stable"}
{"schema": "olm.channel", "package": "app", "name": "stable", "entries": [{"name": "app.v1.0.0"}]}
{"schema": "olm.bundle", "package": "app", "name": "app.v1.0.0", "image": "example.com/app:v1.0.0", "properties": [
  {"type": "olm.package", "value": {"packageName": "app", "version": "1.0.0"}},
  {"type": "olm.gvk.required", "value": {"group": "example.com", "version": "v1", "kind": "Widget"}}]}
{"schema": "olm.package", "name": "gadget-a", "defaultChannel": "stable"}
{"schema": "olm.channel", "package": "gadget-a", "name": "stable", "entries": [{"name": "gadget-a.v1.0.0"}]}
{"schema": "olm.bundle", "package": "gadget-a", "name": "gadget-a.v1.0.0", "image": "example.com/gadget-a:v1.0.0", "properties": [
  {"type": "olm.package", "value": {"packageName": "gadget-a", "version": "1.0.0"}},
  {"type": "olm.gvk", "value": {"group": "example.com", "version": "v1", "kind": "Gadget"}}]}
{"schema": "olm.package", "name": "gadget-b", "defaultChannel": "stable"}
{"schema": "olm.channel", "package": "gadget-b", "name": "stable", "entries": [{"name": "gadget-b.v1.0.0"}]}
{"schema": "olm.bundle", "package": "gadget-b", "name": "gadget-b.v1.0.0", "image": "example.com/gadget-b:v1.0.0", "properties": [
  {"type": "olm.package", "value": {"packageName": "gadget-b", "version": "1.0.0"}},
  {"type": "olm.gvk", "value": {"group": "example.com", "version": "v2", "kind": "Gadget"}}]}
"#;

fn index() -> Index {
    let fbc = load_files([("c.json".to_owned(), CATALOG.as_bytes())]).unwrap();
    Index::build(&[CatalogInput {
        name: "c".into(),
        priority: 0,
        labels: Default::default(),
        fbc: Arc::new(fbc),
    }])
}

fn req(name: &str, package: &str) -> Request {
    Request {
        name: Some(name.into()),
        package_name: package.into(),
        ..Default::default()
    }
}

fn gvk(version: &str, kind: &str) -> Gvk {
    Gvk {
        group: "example.com".into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn solve(requests: &[Request], apis: &ClusterApis) -> Vec<Outcome> {
    resolve_each_on(&index(), requests, &[], apis, None)
}

fn message(o: &Outcome) -> String {
    match o {
        Ok(r) => panic!("unexpectedly resolved to {}", r.name),
        Err(e) => e.sentences().join(" "),
    }
}

#[test]
fn a_required_api_the_cluster_serves_needs_no_bundle() {
    let requests = [req("app", "app")];
    let without = solve(&requests, &ClusterApis::default());
    assert!(
        message(&without[0]).contains("example.com/v1 Widget"),
        "{}",
        message(&without[0])
    );
    let mut apis = ClusterApis::default();
    apis.served.insert(gvk("v1", "Widget"));
    assert_eq!(
        solve(&requests, &apis)[0].as_ref().unwrap().name,
        "app.v1.0.0"
    );
    // Another version of the kind is another API.
    let mut other = ClusterApis::default();
    other.served.insert(gvk("v2", "Widget"));
    assert!(solve(&requests, &other)[0].is_err());
}

#[test]
fn an_aggregated_api_serves_every_kind_of_its_group_and_version() {
    let mut apis = ClusterApis::default();
    apis.served.insert(gvk("v1", ""));
    assert!(solve(&[req("app", "app")], &apis)[0].is_ok());
}

#[test]
fn a_bundle_providing_an_api_another_bundle_deployment_owns_is_not_chosen_and_says_why() {
    let mut apis = ClusterApis::default();
    apis.owned
        .insert(("example.com".into(), "Gadget".into()), "gadget-a".into());
    let outcomes = solve(
        &[req("gadget-a", "gadget-a"), req("other", "gadget-b")],
        &apis,
    );
    // Its own BundleDeployment owns the CRD: gadget-a resolves as before.
    assert_eq!(outcomes[0].as_ref().unwrap().name, "gadget-a.v1.0.0");
    // Any version of the kind: the CRD is one object whatever versions it serves.
    assert_eq!(
        message(&outcomes[1]),
        "Request other (package \"gadget-b\") cannot be satisfied: gadget-b.v1.0.0 (1.0.0, catalog c) provides API example.com/v2 Gadget, whose CRD BundleDeployment \"gadget-a\" already owns; an API has one owner, so no bundle that provides it is chosen, and that leaves none of gadget-b.v1.0.0 matching package \"gadget-b\". Delete the Operator that owns the API, or ask for a package that does not provide it."
    );
}
