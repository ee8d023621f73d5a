//! One test per check: each refused change is found and named; each safe one is not.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::validate::{Schema, draft4};
use super::*;

/// A CRD whose version `v1` has `spec` as given (served and stored), with `stored` versions.
fn crd(spec: Value) -> Value {
    crd_with(json!([version("v1", spec)]), "Namespaced")
}

fn version(name: &str, spec: Value) -> Value {
    json!({
        "name": name, "served": true, "storage": name == "v1",
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
    })
}

fn crd_with(versions: Value, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": scope,
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": versions,
        },
        "status": {"storedVersions": ["v1"]},
    })
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

/// The violations of changing `spec`'s schema from `old` to `new`, as text.
fn changes(old: Value, new: Value) -> Vec<String> {
    check(&crd(old), &crd(new))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_same_crd_and_documentation_changes_are_safe() {
    let spec = object(json!({"size": {"type": "integer", "description": "how big"}}));
    assert!(changes(spec.clone(), spec.clone()).is_empty());
    let described =
        object(json!({"size": {"type": "integer", "description": "how large", "title": "Size"}}));
    assert!(changes(spec, described).is_empty());
}

#[test]
fn a_new_optional_field_and_a_new_served_version_are_safe() {
    let old = object(json!({"size": {"type": "integer"}}));
    let new = object(json!({"size": {"type": "integer"}, "color": {"type": "string"}}));
    assert!(changes(old.clone(), new).is_empty());
    let two = crd_with(
        json!([version("v1", old.clone()), version("v2", old.clone())]),
        "Namespaced",
    );
    assert!(check(&crd(old), &two).is_empty());
}

#[test]
fn scope_change() {
    let spec = object(json!({}));
    let v = check(
        &crd(spec.clone()),
        &crd_with(json!([version("v1", spec)]), "Cluster"),
    );
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].to_string(),
        "*: ^: scope: changed from Namespaced to Cluster: every existing object would be lost"
    );
}

#[test]
fn stored_version_removal() {
    let spec = object(json!({}));
    let only_v2 = crd_with(json!([version("v2", spec.clone())]), "Namespaced");
    let v = check(&crd(spec), &only_v2);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].check, "storedVersionRemoval");
    assert_eq!(v[0].version, "v1");
}

#[test]
fn existing_field_removal() {
    let old = object(json!({"size": {"type": "integer"}, "color": {"type": "string"}}));
    let new = object(json!({"size": {"type": "integer"}}));
    assert_eq!(
        changes(old, new),
        ["v1: ^.spec.color: existingFieldRemoval: the field is removed"]
    );
}

#[test]
fn new_required_field() {
    let old = object(json!({"size": {"type": "integer"}}));
    let mut new = old.clone();
    new["required"] = json!(["size"]);
    assert_eq!(
        changes(old, new),
        ["v1: ^.spec: required: new required fields: size"]
    );
}

#[test]
fn enum_added_where_none_or_values_removed_but_values_added_are_safe() {
    let free = object(json!({"mode": {"type": "string"}}));
    let two = object(json!({"mode": {"type": "string", "enum": ["a", "b"]}}));
    let one = object(json!({"mode": {"type": "string", "enum": ["a"]}}));
    let three = object(json!({"mode": {"type": "string", "enum": ["a", "b", "c"]}}));
    assert_eq!(
        changes(free, two.clone()),
        ["v1: ^.spec.mode: enum: added where any value was allowed: [\"a\",\"b\"]"]
    );
    assert_eq!(
        changes(two.clone(), one),
        ["v1: ^.spec.mode: enum: values removed: [\"b\"]"]
    );
    assert!(changes(two, three).is_empty());
}

#[test]
fn upper_bounds_added_or_decreased() {
    for keyword in ["maximum", "maxItems", "maxLength", "maxProperties"] {
        let none = object(json!({"f": {}}));
        let ten = object(json!({"f": {keyword: 10}}));
        let five = object(json!({"f": {keyword: 5}}));
        let twenty = object(json!({"f": {keyword: 20}}));
        assert_eq!(
            changes(none, ten.clone()),
            [format!("v1: ^.spec.f: {keyword}: added: 10")]
        );
        assert_eq!(
            changes(ten.clone(), five),
            [format!("v1: ^.spec.f: {keyword}: decreased from 10 to 5")]
        );
        assert!(
            changes(ten, twenty).is_empty(),
            "{keyword}: a looser bound is safe"
        );
    }
}

#[test]
fn lower_bounds_added_or_increased() {
    for keyword in ["minimum", "minItems", "minLength", "minProperties"] {
        let none = object(json!({"f": {}}));
        let one = object(json!({"f": {keyword: 1}}));
        let three = object(json!({"f": {keyword: 3}}));
        let zero = object(json!({"f": {keyword: 0}}));
        assert_eq!(
            changes(none, one.clone()),
            [format!("v1: ^.spec.f: {keyword}: added: 1")]
        );
        assert_eq!(
            changes(one.clone(), three),
            [format!("v1: ^.spec.f: {keyword}: increased from 1 to 3")]
        );
        assert!(
            changes(one, zero).is_empty(),
            "{keyword}: a looser bound is safe"
        );
    }
}

#[test]
fn default_added_removed_or_changed() {
    let none = object(json!({"f": {"type": "integer"}}));
    let one = object(json!({"f": {"type": "integer", "default": 1}}));
    let two = object(json!({"f": {"type": "integer", "default": 2}}));
    assert_eq!(
        changes(none.clone(), one.clone()),
        ["v1: ^.spec.f: default: added: 1"]
    );
    assert_eq!(
        changes(one.clone(), none),
        ["v1: ^.spec.f: default: removed (was 1)"]
    );
    assert_eq!(
        changes(one, two),
        ["v1: ^.spec.f: default: changed from 1 to 2"]
    );
}

#[test]
fn type_changed() {
    let old = object(json!({"f": {"type": "integer"}}));
    let new = object(json!({"f": {"type": "string"}}));
    assert_eq!(
        changes(old, new),
        ["v1: ^.spec.f: type: changed from \"integer\" to \"string\""]
    );
}

#[test]
fn anything_else_is_refused_as_unhandled() {
    let old = object(json!({"f": {"type": "string"}}));
    let new = object(json!({"f": {"type": "string", "pattern": "^[a-z]+$"}}));
    let v = changes(old, new);
    assert_eq!(v.len(), 1);
    assert!(
        v[0].starts_with("v1: ^.spec.f: unhandled: \"pattern\" changed from absent to"),
        "{v:?}"
    );
}

#[test]
fn array_items_and_map_values_are_compared_too() {
    let old = object(
        json!({"list": {"type": "array", "items": {"type": "string"}},
                            "map": {"type": "object", "additionalProperties": {"type": "string"}}}),
    );
    let new = object(
        json!({"list": {"type": "array", "items": {"type": "integer"}},
                            "map": {"type": "object", "additionalProperties": {"type": "integer"}}}),
    );
    let v = changes(old, new);
    assert!(
        v.contains(&"v1: ^.spec.list[*]: type: changed from \"string\" to \"integer\"".to_owned()),
        "{v:?}"
    );
    assert!(
        v.contains(&"v1: ^.spec.map{*}: type: changed from \"string\" to \"integer\"".to_owned()),
        "{v:?}"
    );
}

#[test]
fn the_message_names_each_violation_fits_and_says_how_to_opt_out() {
    let one = Violation {
        version: "v1".into(),
        field: "^.spec.f".into(),
        check: "type",
        detail: "changed".into(),
    };
    let m = message("widgets.example.com", std::slice::from_ref(&one));
    assert_eq!(
        m,
        "CRD \"widgets.example.com\" cannot be upgraded safely: v1: ^.spec.f: type: changed (to apply it anyway, annotate the BundleDeployment core.rukpak.io/safe-crd-upgrade-validation=\"false\")"
    );
    let many = vec![one; 2000];
    let m = message("widgets.example.com", &many);
    assert!(m.len() < 5000, "{}", m.len());
    assert!(m.contains("; and ") && m.contains(" more"), "{m}");
}

#[test]
fn the_opt_out_is_the_annotation_set_to_false() {
    let mut a = std::collections::BTreeMap::new();
    assert!(!opted_out(&a));
    a.insert(OPT_OUT.to_owned(), "true".to_owned());
    assert!(!opted_out(&a));
    a.insert(OPT_OUT.to_owned(), "false".to_owned());
    assert!(opted_out(&a));
}

#[test]
fn changed_served_versions_are_those_whose_schema_changed_or_that_are_new() {
    let a = object(json!({"size": {"type": "integer"}}));
    let b = object(json!({"size": {"type": "integer", "maximum": 3}}));
    let old = crd(a.clone());
    assert!(changed_served(&old, &crd(a.clone())).is_empty());
    assert_eq!(changed_served(&old, &crd(b.clone())), ["v1"]);
    let two = crd_with(json!([version("v1", a), version("v2", b)]), "Namespaced");
    assert_eq!(changed_served(&old, &two), ["v2"]);
}

#[test]
fn existing_objects_are_validated_as_kubernetes_reads_the_schema() {
    let openapi = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "maximum": 3},
        "note": {"type": "string", "nullable": true},
        "mode": {"type": "string", "enum": ["a"], "nullable": true},
        "any": {"x-kubernetes-int-or-string": true, "nullable": true},
        "at": {"type": "string", "format": "date-time"},
    }}}});
    let schema = Schema::compile(&openapi).unwrap();
    let ok =
        json!({"spec": {"size": 3, "note": null, "mode": null, "any": null, "at": "not a date"}});
    assert_eq!(
        schema.first_error(&ok),
        None,
        "nullable admits null; formats are not checked"
    );
    let big = json!({"spec": {"size": 5}});
    assert_eq!(
        schema.first_error(&big).as_deref(),
        Some("/spec/size: 5 is greater than the maximum of 3")
    );
    assert_eq!(
        draft4(&json!({"type": "string", "nullable": true})),
        json!({"type": ["string", "null"]})
    );
}

#[test]
fn keywords_crds_forbid_are_refused_before_the_schema_is_compiled() {
    let cases = [
        (json!({"$ref": "http://169.254.169.254/latest"}), "^: $ref"),
        (
            json!({"type": "object", "properties": {"spec": {"id": "http://x/"}}}),
            "^.spec: id",
        ),
        (
            json!({"type": "object", "definitions": {"a": {"type": "string"}}}),
            "^: definitions",
        ),
        (
            json!({"type": "array", "items": {"allOf": [{"$ref": "#/definitions/a"}]}}),
            "^[*]: $ref",
        ),
        (
            json!({"type": "object", "additionalProperties": {"patternProperties": {}}}),
            "^{*}: patternProperties",
        ),
    ];
    for (openapi, said) in cases {
        let Err(e) = Schema::compile(&openapi) else {
            panic!("{openapi} compiled");
        };
        assert!(e.to_string().contains(said), "{e}");
        assert!(
            e.to_string().ends_with("is not allowed in a CRD's schema"),
            "{e}"
        );
    }
    // A property named like a keyword is a property.
    let named = json!({"type": "object", "properties": {"id": {"type": "string"}, "$ref": {"type": "string"}}});
    assert!(Schema::compile(&named).is_ok());
}
