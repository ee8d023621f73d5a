//! Kubernetes label selectors over catalog labels (`matchLabels` and `matchExpressions`), as
//! an Operator's `catalogSelector` uses them. Kept here so the resolver needs no Kubernetes
//! crates.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A Kubernetes `LabelSelector`. An empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements, all of which must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector. Unknown operators match nothing, as the API server
    /// would have rejected them.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator.as_str() {
                    "In" => value.is_some_and(|v| e.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !e.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for e in &self.match_expressions {
            parts.push(match e.operator.as_str() {
                "Exists" => e.key.clone(),
                "DoesNotExist" => format!("!{}", e.key),
                op => format!("{} {} ({})", e.key, op.to_lowercase(), e.values.join(",")),
            });
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn an_empty_selector_matches_everything() {
        assert!(LabelSelector::default().matches(&labels(&[])));
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_and_expressions_all_must_hold() {
        let s = LabelSelector {
            match_labels: labels(&[("tier", "community")]),
            match_expressions: vec![
                expr("env", "In", &["prod", "stage"]),
                expr("legacy", "DoesNotExist", &[]),
                expr("zone", "NotIn", &["eu"]),
                expr("owner", "Exists", &[]),
            ],
        };
        assert!(s.matches(&labels(&[
            ("tier", "community"),
            ("env", "prod"),
            ("owner", "x")
        ])));
        assert!(!s.matches(&labels(&[
            ("tier", "community"),
            ("env", "dev"),
            ("owner", "x")
        ])));
        assert!(!s.matches(&labels(&[
            ("tier", "community"),
            ("env", "prod"),
            ("owner", "x"),
            ("legacy", "1")
        ])));
        assert!(!s.matches(&labels(&[
            ("tier", "community"),
            ("env", "prod"),
            ("owner", "x"),
            ("zone", "eu")
        ])));
        assert!(!s.matches(&labels(&[("tier", "community"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[
            ("tier", "other"),
            ("env", "prod"),
            ("owner", "x")
        ])));
        assert_eq!(
            s.to_string(),
            "tier=community,env in (prod,stage),!legacy,zone notin (eu),owner"
        );
    }
}
