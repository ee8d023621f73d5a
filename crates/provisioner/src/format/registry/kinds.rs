//! The kinds a registry+v1 bundle may carry beside its CSV and CRDs, as operator-registry
//! lists them (`pkg/lib/bundle/supported_resources.go`, v1.60: ConsolePlugin, NetworkPolicy
//! and PodMonitor included), matched by kind alone as upstream matches them; and whether each
//! is namespaced (its namespace then becomes the install namespace, whatever the manifest says).

/// Kinds allowed, each with whether it is namespaced.
const SUPPORTED: &[(&str, bool)] = &[
    ("ClusterServiceVersion", true),
    ("CustomResourceDefinition", false),
    ("ClusterRole", false),
    ("ClusterRoleBinding", false),
    ("Service", true),
    ("ServiceAccount", true),
    ("Role", true),
    ("RoleBinding", true),
    ("PrometheusRule", true),
    ("ServiceMonitor", true),
    ("PodMonitor", true),
    ("Secret", true),
    ("ConfigMap", true),
    ("PodDisruptionBudget", true),
    ("PriorityClass", false),
    // Upstream's table calls it cluster-scoped; the API serves it namespaced, and a namespaced
    // object without a namespace would land in `default`.
    ("VerticalPodAutoscaler", true),
    ("ConsoleYAMLSample", false),
    ("ConsoleQuickStart", false),
    ("ConsoleCLIDownload", false),
    ("ConsoleLink", false),
    ("ConsolePlugin", false),
    ("NetworkPolicy", true),
];

/// Whether `kind` may be in a bundle, and if so whether it is namespaced.
pub fn supported(kind: &str) -> Option<bool> {
    SUPPORTED
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, namespaced)| *namespaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_matched_whole_and_say_their_scope() {
        assert_eq!(supported("ConfigMap"), Some(true));
        assert_eq!(supported("ClusterRole"), Some(false));
        assert_eq!(supported("VerticalPodAutoscaler"), Some(true));
        assert_eq!(supported("Deployment"), None);
        assert_eq!(supported("configmap"), None);
    }
}
