//! An item as a Kubernetes object: metadata derived from where it is served, and the blob
//! itself under `spec.content`. What makes bundles and packages heavy and is rarely wanted in
//! a listing (the manifests of `olm.bundle.object` properties, a package's icon) is left out
//! unless asked for (`?content=full`), and an annotation says what was left out.

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::kinds::{API_VERSION, Item, Kind};

/// The annotation saying what was left out of `spec.content`.
pub const OMITTED: &str = "catalogs.olm-rs.io/omitted";

/// Where an object comes from: its catalog's served content.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The content's hash (the Catalog's `status.contentHash`).
    pub hash: &'a str,
    /// When that content was first stored, RFC 3339.
    pub created: &'a str,
    /// The resourceVersion of everything served now ([`crate::content::version`]): every
    /// object carries it, so a client that resumes a watch from the last object it saw
    /// resumes from a version the server knows.
    pub version: &'a str,
}

/// The object's `metadata`.
pub fn metadata(item: &Item, origin: Origin<'_>) -> Value {
    let labels: Map<String, Value> = item
        .labels()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    json!({
        "name": item.object,
        "uid": uid(&item.object, origin.hash),
        "resourceVersion": origin.version,
        "creationTimestamp": origin.created,
        "labels": labels,
    })
}

/// A uid that is the same for the same object of the same content.
fn uid(name: &str, hash: &str) -> String {
    let digest = Sha256::digest(format!("{name}\n{hash}"));
    let h = hex::encode(&digest[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The whole object, from its blob's bytes (`full`: nothing left out).
pub fn object(kind: Kind, item: &Item, origin: Origin<'_>, blob: &[u8], full: bool) -> Value {
    let mut content: Value = serde_json::from_slice(blob).unwrap_or(Value::Null);
    let omitted = if full { None } else { lighten(&mut content) };
    let mut metadata = metadata(item, origin);
    if let (Some(omitted), Some(meta)) = (omitted, metadata.as_object_mut()) {
        meta.insert("annotations".into(), json!({ OMITTED: omitted }));
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": kind.kind(),
        "metadata": metadata,
        "spec": {
            "catalog": item.catalog,
            "schema": item.schema,
            "package": item.package,
            "name": item.name,
            "content": content,
        },
    })
}

/// Leaves out `olm.bundle.object` properties and an icon, saying what went.
fn lighten(content: &mut Value) -> Option<String> {
    let blob = content.as_object_mut()?;
    let mut said = Vec::new();
    if let Some(icon) = blob.remove("icon") {
        said.push(format!("icon ({} bytes)", icon.to_string().len()));
    }
    if let Some(Value::Array(properties)) = blob.get_mut("properties") {
        let before = properties.len();
        let mut bytes = 0usize;
        properties.retain(|p| {
            let heavy = p.get("type").and_then(Value::as_str) == Some("olm.bundle.object");
            if heavy {
                bytes += p.to_string().len();
            }
            !heavy
        });
        let gone = before - properties.len();
        if gone > 0 {
            said.push(format!(
                "{gone} olm.bundle.object properties ({bytes} bytes)"
            ));
        }
    }
    (!said.is_empty()).then(|| format!("{}; get it with ?content=full", said.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> Item {
        Item {
            object: "ops.etcd.etcd.v1".into(),
            catalog: "ops".into(),
            schema: "olm.bundle".into(),
            package: "etcd".into(),
            name: "etcd.v1".into(),
            offset: 0,
            length: 0,
        }
    }

    const BLOB: &[u8] = br#"{"schema":"olm.bundle","name":"etcd.v1","properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"1.0.0"}},{"type":"olm.bundle.object","value":{"data":"AAAA"}}]}"#;

    #[test]
    fn heavy_properties_are_left_out_unless_asked_for() {
        let origin = Origin {
            hash: "0123456789abcdef0123",
            created: "2026-01-01T00:00:00Z",
            version: "0123456789abcdef",
        };
        let light = object(Kind::Bundle, &item(), origin, BLOB, false);
        assert_eq!(
            light["spec"]["content"]["properties"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        let said = light["metadata"]["annotations"][OMITTED].as_str().unwrap();
        assert!(said.starts_with("1 olm.bundle.object properties"), "{said}");
        assert_eq!(light["metadata"]["labels"]["package"], "etcd");
        assert_eq!(light["metadata"]["resourceVersion"], "0123456789abcdef");
        let full = object(Kind::Bundle, &item(), origin, BLOB, true);
        assert_eq!(
            full["spec"]["content"]["properties"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(full["metadata"].get("annotations").is_none());
        assert_eq!(full["metadata"]["uid"], light["metadata"]["uid"]);
    }
}
