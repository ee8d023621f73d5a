//! Discovery documents: the legacy ones (`/apis`, `/apis/<group>`, `/apis/<group>/<version>`)
//! and the aggregated one (KEP-3352, `apidiscovery.k8s.io/v2`), which the API server fetches
//! once and serves to every client from its cache, so clients never ask catalogd.

use serde_json::{Value, json};

use crate::kinds::{API_VERSION, GROUP, Kind, VERSION};

/// The media type of the aggregated discovery document, v2.
pub const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The media type of the aggregated discovery document, v2beta1.
pub const V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Which aggregated document an `Accept` header asks for, if any (v2 preferred).
pub fn aggregated(accept: &str) -> Option<&'static str> {
    let wants = |version: &str| {
        accept.split(',').any(|media| {
            let params: Vec<String> = media
                .split(';')
                .skip(1)
                .map(|p| p.trim().replace(' ', ""))
                .collect();
            params.iter().any(|p| p == "g=apidiscovery.k8s.io")
                && params.iter().any(|p| *p == format!("v={version}"))
                && params.iter().any(|p| p == "as=APIGroupDiscoveryList")
        })
    };
    if wants("v2") {
        Some(V2)
    } else if wants("v2beta1") {
        Some(V2BETA1)
    } else {
        None
    }
}

/// The aggregated discovery document, as the media type `media` names.
pub fn aggregated_document(media: &str) -> Value {
    let api_version = if media == V2BETA1 {
        "apidiscovery.k8s.io/v2beta1"
    } else {
        "apidiscovery.k8s.io/v2"
    };
    let resources: Vec<Value> = Kind::ALL
        .iter()
        .map(|k| {
            json!({
                "resource": k.resource(),
                "responseKind": {"group": GROUP, "version": VERSION, "kind": k.kind()},
                "scope": "Cluster",
                "singularResource": k.singular(),
                "verbs": ["get", "list", "watch"],
                "categories": ["olm-catalog"],
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": [{
            "metadata": {"name": GROUP, "creationTimestamp": null},
            "versions": [{"version": VERSION, "resources": resources, "freshness": "Current"}],
        }],
    })
}

fn group() -> Value {
    json!({
        "name": GROUP,
        "versions": [{"groupVersion": API_VERSION, "version": VERSION}],
        "preferredVersion": {"groupVersion": API_VERSION, "version": VERSION},
    })
}

/// `/apis`: the one group.
pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
}

/// `/apis/<group>`.
pub fn api_group() -> Value {
    let mut g = group();
    if let Some(o) = g.as_object_mut() {
        o.insert("kind".into(), json!("APIGroup"));
        o.insert("apiVersion".into(), json!("v1"));
    }
    g
}

/// `/apis/<group>/<version>`.
pub fn resource_list() -> Value {
    let resources: Vec<Value> = Kind::ALL
        .iter()
        .map(|k| {
            json!({
                "name": k.resource(),
                "singularName": k.singular(),
                "namespaced": false,
                "kind": k.kind(),
                "verbs": ["get", "list", "watch"],
                "categories": ["olm-catalog"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_server_s_accept_header_gets_v2() {
        // What the aggregator sends (handler_discovery.go).
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        assert_eq!(aggregated(accept), Some(V2));
        assert_eq!(
            aggregated("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
            Some(V2BETA1)
        );
        assert_eq!(aggregated("application/json, */*"), None);
        let doc = aggregated_document(V2);
        assert_eq!(
            doc["items"][0]["versions"][0]["resources"][2]["resource"],
            "bundles"
        );
    }
}
