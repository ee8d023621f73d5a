//! Manifest files as Kubernetes tooling reads them: several YAML documents, or a JSON stream
//! of objects, per file; empty documents skipped; `List` kinds flattened into their items (as
//! kubectl's and cli-runtime's `Flatten` do).

use serde_json::Value;

/// Why a manifest file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// The documents of one file, `List`s flattened, empty documents dropped.
pub fn documents(content: &[u8]) -> Result<Vec<Value>, Unreadable> {
    let text = std::str::from_utf8(content).map_err(|e| Unreadable(format!("not UTF-8: {e}")))?;
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    let docs: Vec<Value> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::Deserializer::from_str(trimmed)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| Unreadable(format!("invalid JSON: {e}")))?
    } else {
        serde_saphyr::from_multiple(text).map_err(|e| Unreadable(format!("invalid YAML: {e}")))?
    };
    let mut out = Vec::new();
    for doc in docs {
        flatten(doc, &mut out);
    }
    Ok(out)
}

/// Pushes `doc`, or the items of a `List` (recursively), skipping nulls.
fn flatten(doc: Value, out: &mut Vec<Value>) {
    match doc {
        Value::Null => {}
        Value::Object(mut map) if is_list(&map) => {
            if let Some(Value::Array(items)) = map.remove("items") {
                for item in items {
                    flatten(item, out);
                }
            }
        }
        other => out.push(other),
    }
}

/// A `List` as cli-runtime flattens it: a kind ending in `List` with an `items` array.
fn is_list(map: &serde_json::Map<String, Value>) -> bool {
    map.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && map.get("items").is_some_and(Value::is_array)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_documents_and_json_streams_are_read_and_lists_flattened() {
        let yaml = b"---\na: 1\n---\n---\nkind: List\nitems:\n- b: 2\n- kind: ConfigMapList\n  items: [{c: 3}]\n";
        assert_eq!(
            documents(yaml).unwrap_or_default(),
            [json!({"a": 1}), json!({"b": 2}), json!({"c": 3})]
        );
        let json_stream = b"{\"a\": 1}\n{\"kind\": \"List\", \"items\": [{\"b\": 2}]}";
        assert_eq!(
            documents(json_stream).unwrap_or_default(),
            [json!({"a": 1}), json!({"b": 2})]
        );
        // A kind that ends in List but has no items is an object like any other.
        let not_a_list = b"kind: PodList\nmetadata: {name: x}\n";
        assert_eq!(documents(not_a_list).unwrap_or_default().len(), 1);
        assert!(documents(b"").unwrap_or_default().is_empty());
    }

    #[test]
    fn broken_files_say_what_is_wrong() {
        let yaml = documents(b"a: [1\n").unwrap_err();
        assert!(yaml.0.starts_with("invalid YAML"), "{yaml}");
        let json = documents(b"{\"a\": }").unwrap_err();
        assert!(json.0.starts_with("invalid JSON"), "{json}");
        assert!(documents(&[0xff, 0xfe]).is_err());
    }
}
