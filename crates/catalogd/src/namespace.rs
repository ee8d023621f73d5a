//! The Pod Security label of catalogd's namespace. catalogd runs generator Pods there (a
//! container image and command chosen by a Catalog's author), so the namespace should enforce
//! the restricted level. The chart labels a namespace it creates; a namespace helm creates
//! (`helm install -n NS --create-namespace`) has no labels, and nothing in a chart can add one,
//! so catalogd adds it when leading (`--namespace-pod-security`). A label an admin set is never
//! changed, only reported.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};

/// The label the API server's Pod Security admission enforces.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// The levels of Pod Security admission.
pub const LEVELS: [&str; 3] = ["privileged", "baseline", "restricted"];

/// What to do with the namespace's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Labelling {
    /// The namespace enforces `level` already.
    Present,
    /// It enforces nothing: add the label.
    Add,
    /// It enforces another level, chosen by an admin: left alone.
    Other(String),
}

/// What `labels` (the namespace's) call for, to enforce `level`.
pub fn decide(labels: Option<&BTreeMap<String, String>>, level: &str) -> Labelling {
    match labels.and_then(|l| l.get(ENFORCE_LABEL)) {
        Some(current) if current == level => Labelling::Present,
        Some(current) => Labelling::Other(current.clone()),
        None => Labelling::Add,
    }
}

/// Makes `namespace` enforce `level` unless it enforces a level already; what was found.
pub async fn ensure_pod_security(
    client: &kube::Client,
    namespace: &str,
    level: &str,
) -> Result<Labelling, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let current = api.get_metadata(namespace).await?;
    let decision = decide(current.metadata.labels.as_ref(), level);
    if decision == Labelling::Add {
        // A merge patch of that one label: every other label stays as it is.
        let patch = serde_json::json!({"metadata": {"labels": {ENFORCE_LABEL: level}}});
        api.patch_metadata(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(decision)
}

/// [`ensure_pod_security`], logged: a failure is not fatal (generator Pods meet the
/// restricted level by themselves).
pub async fn label(client: &kube::Client, namespace: &str, level: &str) {
    match ensure_pod_security(client, namespace, level).await {
        Ok(Labelling::Add) => {
            tracing::info!(%namespace, label = ENFORCE_LABEL, %level, "labelled the namespace for Pod Security")
        }
        Ok(Labelling::Present) => {}
        Ok(Labelling::Other(current)) => tracing::warn!(
            %namespace,
            label = ENFORCE_LABEL,
            %current,
            wanted = %level,
            "the namespace enforces another Pod Security level, set by someone else; left as it is"
        ),
        Err(error) => tracing::warn!(
            %namespace,
            error = %olm_runtime::error_chain(&error),
            "could not set the namespace's Pod Security label (--namespace-pod-security); generator Pods still run restricted"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_missing_label_is_added_and_an_admins_is_kept() {
        assert_eq!(decide(None, "restricted"), Labelling::Add);
        assert_eq!(
            decide(Some(&labels(&[("name", "olm-system")])), "restricted"),
            Labelling::Add
        );
        assert_eq!(
            decide(
                Some(&labels(&[(ENFORCE_LABEL, "restricted")])),
                "restricted"
            ),
            Labelling::Present
        );
        assert_eq!(
            decide(Some(&labels(&[(ENFORCE_LABEL, "baseline")])), "restricted"),
            Labelling::Other("baseline".into())
        );
    }
}
