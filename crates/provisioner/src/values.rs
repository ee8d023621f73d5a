//! A chart's values as Helm will merge them (pure): one layer per `valuesFrom` entry, read
//! from its Secret or ConfigMap, in order, then the inline `values` over them; and the hash
//! of them all, which says whether a chart must be rendered again (unchanged values never
//! are). Whether a layer is YAML of a map, and whether the merged values meet the chart's
//! `values.schema.json`, Helm says when it renders.

use std::collections::BTreeMap;

use olm_api::bundle_deployment::{BundleDeployment, VALUES_LABEL, ValuesKind, ValuesReference};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::settings::{VALUES_FROM, Values};
use crate::status::reasons;

/// One file of values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// What it is, as the user wrote it (`valuesFrom[0] (Secret shop-values, key values.yaml)`).
    pub name: String,
    /// Its YAML.
    pub content: Vec<u8>,
}

/// Why values cannot be read (a refusal: its reason and message).
pub type ValuesError = crate::source::Refusal;

/// Whether `bd`'s `spec.config.valuesFrom` names the `kind` `name` (whatever its format: a
/// change of that object is worth a look).
pub fn reads(bd: &BundleDeployment, kind: ValuesKind, name: &str) -> bool {
    let Some(Value::Array(from)) = bd.spec.config.as_ref().and_then(|c| c.get(VALUES_FROM)) else {
        return false;
    };
    from.iter()
        .filter_map(|entry| serde_json::from_value::<ValuesReference>(entry.clone()).ok())
        .any(|r| r.kind == kind && r.name == name)
}

/// A Secret or ConfigMap a `valuesFrom` entry names, as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Whether it carries [`VALUES_LABEL`]`=true`.
    pub opted_in: bool,
    /// Its keys and their bytes.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl Found {
    /// An object with `labels` and `data`.
    pub fn of(labels: Option<&BTreeMap<String, String>>, data: BTreeMap<String, Vec<u8>>) -> Found {
        Found {
            opted_in: labels
                .and_then(|l| l.get(VALUES_LABEL))
                .is_some_and(|v| v == "true"),
            data,
        }
    }
}

/// The layer of `valuesFrom[index]` in `namespace`, given the object it names (`None`: there
/// is no such object); `None` when it is optional and missing. An object that did not opt in
/// is refused, optional or not: it exists, and reading it is what must not happen.
pub fn layer(
    index: usize,
    reference: &ValuesReference,
    namespace: &str,
    found: Option<&Found>,
) -> Result<Option<Layer>, ValuesError> {
    let kind = match reference.kind {
        ValuesKind::Secret => "Secret",
        ValuesKind::ConfigMap => "ConfigMap",
    };
    let name = format!(
        "valuesFrom[{index}] ({kind} {}, key {})",
        reference.name,
        reference.key()
    );
    let missing = |what: String| {
        if reference.optional {
            Ok(None)
        } else {
            Err(ValuesError {
                reason: reasons::VALUES_NOT_FOUND,
                message: format!(
                    "{name}: {what} (values are read from the provisioner's namespace; mark the entry optional: true to go on without it)"
                ),
            })
        }
    };
    let Some(found) = found else {
        return missing(format!("{kind} {} does not exist", reference.name));
    };
    if !found.opted_in {
        return Err(ValuesError {
            reason: reasons::VALUES_NOT_ALLOWED,
            message: format!(
                "{name}: {kind} {namespace}/{} is not labelled {VALUES_LABEL}=true, so it is not read (the managers' namespace also holds credentials and keys); label it to opt in: kubectl label {} -n {namespace} {} {VALUES_LABEL}=true",
                reference.name,
                kind.to_lowercase(),
                reference.name
            ),
        });
    }
    match found.data.get(reference.key()) {
        Some(content) => Ok(Some(Layer {
            name,
            content: content.clone(),
        })),
        None => missing(format!(
            "{kind} {} has no key {}",
            reference.name,
            reference.key()
        )),
    }
}

/// Every layer in merge order: those read from `valuesFrom`, then the inline values.
pub fn layers(values: &Values, from: Vec<Layer>) -> Vec<Layer> {
    let inline = values.inline.as_ref().map(|text| Layer {
        name: "spec.config.values".into(),
        content: text.as_bytes().to_vec(),
    });
    from.into_iter().chain(inline).collect()
}

/// The hash of `layers` (names and contents, in order).
pub fn hash(layers: &[Layer]) -> String {
    let mut digest = Sha256::new();
    for layer in layers {
        for part in [layer.name.as_bytes(), &layer.content] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
    }
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(optional: bool, key: Option<&str>) -> ValuesReference {
        ValuesReference {
            kind: ValuesKind::Secret,
            name: "shop-values".into(),
            key: key.map(str::to_owned),
            optional,
        }
    }

    #[test]
    fn a_bundle_deployment_reads_the_objects_its_values_from_names() {
        let bd: BundleDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
            "metadata": {"name": "shop"},
            "spec": {"provisionerClassName": "core-rukpak-io-plain",
                "template": {"spec": {"provisionerClassName": "core-rukpak-io-helm",
                    "source": {"type": "image", "image": {"ref": "r/c:1"}}}},
                "config": {"valuesFrom": [{"kind": "Secret", "name": "a"}, {"kind": "ConfigMap", "name": "b"}]}},
        }))
        .unwrap();
        assert!(reads(&bd, ValuesKind::Secret, "a"));
        assert!(reads(&bd, ValuesKind::ConfigMap, "b"));
        assert!(!reads(&bd, ValuesKind::ConfigMap, "a"));
        assert!(!reads(&bd, ValuesKind::Secret, "c"));
    }

    fn opted_in(data: BTreeMap<String, Vec<u8>>) -> Found {
        let labels = BTreeMap::from([(VALUES_LABEL.to_owned(), "true".to_owned())]);
        Found::of(Some(&labels), data)
    }

    #[test]
    fn a_layer_is_the_named_key_of_the_named_object() {
        let data = opted_in(BTreeMap::from([(
            "values.yaml".to_owned(),
            b"a: 1".to_vec(),
        )]));
        let got = layer(0, &reference(false, None), "olm-system", Some(&data)).unwrap();
        assert_eq!(
            got,
            Some(Layer {
                name: "valuesFrom[0] (Secret shop-values, key values.yaml)".into(),
                content: b"a: 1".to_vec()
            })
        );
    }

    #[test]
    fn an_object_that_did_not_opt_in_is_never_read() {
        let data = BTreeMap::from([("values.yaml".to_owned(), b"key: secret".to_vec())]);
        for found in [
            Found::of(None, data.clone()),
            Found::of(
                Some(&BTreeMap::from([(
                    VALUES_LABEL.to_owned(),
                    "yes".to_owned(),
                )])),
                data,
            ),
        ] {
            for optional in [false, true] {
                let err =
                    layer(0, &reference(optional, None), "olm-system", Some(&found)).unwrap_err();
                assert_eq!(err.reason, reasons::VALUES_NOT_ALLOWED);
                assert!(
                    err.message.contains(
                        "kubectl label secret -n olm-system shop-values olm-rs.io/values=true"
                    ),
                    "{err}"
                );
            }
        }
    }

    #[test]
    fn missing_values_are_a_reason_unless_optional() {
        let data = opted_in(BTreeMap::new());
        let err = layer(
            2,
            &reference(false, Some("prod.yaml")),
            "olm-system",
            Some(&data),
        )
        .unwrap_err();
        assert_eq!(err.reason, reasons::VALUES_NOT_FOUND);
        assert!(
            err.message
                .starts_with("valuesFrom[2] (Secret shop-values, key prod.yaml): Secret shop-values has no key prod.yaml"),
            "{err}"
        );
        let err = layer(0, &reference(false, None), "olm-system", None).unwrap_err();
        assert!(
            err.message.contains("Secret shop-values does not exist"),
            "{err}"
        );
        assert_eq!(
            layer(0, &reference(true, None), "olm-system", None),
            Ok(None)
        );
        assert_eq!(
            layer(0, &reference(true, None), "olm-system", Some(&data)),
            Ok(None)
        );
    }

    #[test]
    fn inline_values_go_last_and_any_change_changes_the_hash() {
        let values = Values {
            from: Vec::new(),
            inline: Some("b: 2".into()),
        };
        let from = vec![Layer {
            name: "valuesFrom[0]".into(),
            content: b"a: 1".to_vec(),
        }];
        let all = layers(&values, from.clone());
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].name, "spec.config.values");
        let other = layers(
            &Values {
                inline: Some("b: 3".into()),
                ..values.clone()
            },
            from,
        );
        assert_ne!(hash(&all), hash(&other));
        assert_eq!(hash(&all), hash(&all.clone()));
        // Moving bytes between name and content is another hash.
        let a = [Layer {
            name: "ab".into(),
            content: b"c".to_vec(),
        }];
        let b = [Layer {
            name: "a".into(),
            content: b"bc".to_vec(),
        }];
        assert_ne!(hash(&a), hash(&b));
    }
}
