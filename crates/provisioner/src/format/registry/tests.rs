use serde_json::json;

use super::*;

const ANNOTATIONS_YAML: &str =
    "annotations:\n  operators.operatorframework.io.bundle.package.v1: widget\n";

fn csv() -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "widget.v1.0.0", "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "AllNamespaces", "supported": true},
            ],
            "customresourcedefinitions": {"owned": [{"name": "widgets.example.com"}]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": "widget", "rules": [
                    {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"]}]}],
                "permissions": [{"serviceAccountName": "", "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}],
                "deployments": [{"name": "widget-manager", "label": {"app": "widget"}, "spec": {
                    "selector": {"matchLabels": {"app": "widget"}},
                    "template": {
                        "metadata": {"labels": {"app": "widget"},
                                     "annotations": {"capabilities": "Full Lifecycle"}},
                        "spec": {"serviceAccountName": "widget-runner",
                                 "containers": [{"name": "m", "image": "example.com/widget:1"}]}}}}],
            }},
        },
    })
}

fn crd(api_version: &str) -> Value {
    json!({"apiVersion": api_version, "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com"}})
}

fn bundle(docs: &[Value]) -> Tree {
    let mut tree = Tree::new().file(ANNOTATIONS, ANNOTATIONS_YAML);
    for (i, doc) in docs.iter().enumerate() {
        tree = tree.file(&format!("manifests/{i:02}.json"), doc.to_string());
    }
    tree
}

fn converted(docs: &[Value]) -> Vec<Object> {
    objects(&bundle(docs)).unwrap_or_else(|e| unreachable!("{e}"))
}

fn find<'a>(objects: &'a [Object], kind: &str) -> Vec<&'a Object> {
    objects.iter().filter(|o| o.key.kind == kind).collect()
}

#[test]
fn the_csv_becomes_namespace_accounts_cluster_rbac_crds_and_deployments() {
    let out = converted(&[csv(), crd("apiextensions.k8s.io/v1")]);
    let kinds: Vec<&str> = out.iter().map(|o| o.key.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "Deployment"
        ]
    );
    // No suggested namespace: <package>-system.
    assert_eq!(out[0].key.name, "widget-system");
    // Accounts the permissions and the Pods name; `default` (the empty name) is never made.
    let accounts: Vec<&str> = find(&out, "ServiceAccount")
        .iter()
        .map(|o| o.key.name.as_str())
        .collect();
    assert_eq!(accounts, ["widget", "widget-runner"]);
    assert!(
        find(&out, "ServiceAccount")
            .iter()
            .all(|o| o.key.namespace.as_deref() == Some("widget-system"))
    );
    // The promoted permission reads namespaces too, and is bound to `default`.
    let roles = find(&out, "ClusterRole");
    let promoted = roles
        .iter()
        .find(|r| r.manifest["rules"].as_array().is_some_and(|l| l.len() == 2))
        .unwrap_or_else(|| unreachable!());
    assert_eq!(
        promoted.manifest["rules"][1],
        json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]})
    );
    let binding = find(&out, "ClusterRoleBinding")
        .into_iter()
        .find(|b| b.key.name == promoted.key.name)
        .unwrap_or_else(|| unreachable!());
    assert_eq!(
        binding.manifest["subjects"],
        json!([{"kind": "ServiceAccount", "name": "default", "namespace": "widget-system"}])
    );
    assert_eq!(
        binding.manifest["roleRef"]["name"],
        json!(promoted.key.name)
    );
    assert!(roles.iter().all(|r| r.key.name.len() <= names::MAX_NAME));
    // `<csv>-<account>` (here `widget.v1.0.0-default`), cut so that the hash fits.
    assert!(
        promoted.key.name.starts_with("widget.v1.0.0-d"),
        "{}",
        promoted.key.name
    );
}

#[test]
fn deployments_carry_the_csv_annotations_under_their_own_and_olms_two() {
    let out = converted(&[csv(), crd("apiextensions.k8s.io/v1")]);
    let d = find(&out, "Deployment")[0];
    assert_eq!(d.key.namespace.as_deref(), Some("widget-system"));
    assert_eq!(d.manifest["metadata"]["labels"], json!({"app": "widget"}));
    assert_eq!(d.manifest["spec"]["revisionHistoryLimit"], json!(1));
    let annotations = &d.manifest["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations,
        &json!({
            "capabilities": "Full Lifecycle",
            "olm.targetNamespaces": "",
            "olm.operatorNamespace": "widget-system",
        })
    );
    // The rest of the template as written.
    assert_eq!(
        d.manifest["spec"]["template"]["metadata"]["labels"],
        json!({"app": "widget"})
    );
    assert_eq!(
        d.manifest["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("example.com/widget:1")
    );
}

#[test]
fn the_suggested_namespace_wins_and_namespaced_objects_are_moved_into_it() {
    let mut c = csv();
    c["metadata"]["annotations"][SUGGESTED_NAMESPACE] = json!("widgets");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "elsewhere"}});
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "widget-critical", "namespace": "stray"}, "value": 1000});
    let out = converted(&[c, crd("apiextensions.k8s.io/v1"), config, class]);
    assert_eq!(out[0].key.name, "widgets");
    let cm = find(&out, "ConfigMap")[0];
    assert_eq!(cm.key.namespace.as_deref(), Some("widgets"));
    assert_eq!(cm.manifest["metadata"]["namespace"], json!("widgets"));
    let pc = find(&out, "PriorityClass")[0];
    assert_eq!(pc.key.namespace, None);
    assert!(pc.manifest["metadata"].get("namespace").is_none());
}

fn refused(tree: &Tree) -> String {
    match objects(tree) {
        Err(e) => e.to_string(),
        Ok(o) => unreachable!("converted: {o:?}"),
    }
}

#[test]
fn a_bundle_without_its_package_is_refused() {
    let no_annotations = Tree::new().file("manifests/a.json", csv().to_string());
    assert!(refused(&no_annotations).starts_with("open metadata/annotations.yaml"));
    let no_package = Tree::new()
        .file(ANNOTATIONS, "annotations: {}\n")
        .file("manifests/a.json", csv().to_string());
    assert!(refused(&no_package).starts_with("package name is empty"));
    let no_manifests = Tree::new().file(ANNOTATIONS, ANNOTATIONS_YAML);
    assert_eq!(
        refused(&no_manifests),
        "readdir manifests: file does not exist"
    );
}

#[test]
fn exactly_one_csv() {
    assert_eq!(
        refused(&bundle(&[crd("apiextensions.k8s.io/v1")])),
        "no ClusterServiceVersion found in \"manifests\""
    );
    let two = refused(&bundle(&[csv(), csv()]));
    assert_eq!(
        two,
        "more than one ClusterServiceVersion: manifests/00.json and manifests/01.json; a registry+v1 bundle has exactly one"
    );
}

/// `csv()` supporting `modes` only.
fn supporting(modes: &[&str]) -> Value {
    let mut c = csv();
    c["spec"]["installModes"] = json!(
        modes
            .iter()
            .map(|m| json!({"type": m, "supported": true}))
            .collect::<Vec<_>>()
    );
    c
}

#[test]
fn an_own_namespace_operator_gets_roles_in_its_namespace_and_watches_it() {
    let out = converted(&[
        supporting(&["OwnNamespace"]),
        crd("apiextensions.k8s.io/v1"),
    ]);
    let kinds: Vec<&str> = out.iter().map(|o| o.key.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ServiceAccount",
            "Role",
            "ClusterRole",
            "RoleBinding",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "Deployment"
        ]
    );
    let role = find(&out, "Role")[0];
    assert_eq!(role.key.namespace.as_deref(), Some("widget-system"));
    // The permission as written: no namespaces rule (that is for all namespaces only).
    assert_eq!(role.manifest["rules"].as_array().map(Vec::len), Some(1));
    let binding = find(&out, "RoleBinding")[0];
    assert_eq!(
        binding.manifest["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.key.name})
    );
    let annotations =
        &find(&out, "Deployment")[0].manifest["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["olm.targetNamespaces"], "widget-system");
}

#[test]
fn a_multi_namespace_operator_gets_roles_in_each_target_and_its_own_namespace() {
    let settings = Settings {
        namespace: Some("ops".into()),
        watch: Some(vec!["team-b".into(), "team-a".into()]),
        deployment: None,
        ..Settings::default()
    };
    let out = objects_for(
        &bundle(&[
            supporting(&["MultiNamespace"]),
            crd("apiextensions.k8s.io/v1"),
        ]),
        &settings,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    // The install namespace is the user's: not made.
    assert!(find(&out, "Namespace").is_empty());
    let places = |kind: &str| -> Vec<String> {
        find(&out, kind)
            .iter()
            .map(|o| o.key.namespace.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(places("Role"), ["ops", "team-a", "team-b"]);
    assert_eq!(places("RoleBinding"), ["ops", "team-a", "team-b"]);
    for binding in find(&out, "RoleBinding") {
        assert_eq!(
            binding.manifest["subjects"],
            json!([{"kind": "ServiceAccount", "name": "default", "namespace": "ops"}])
        );
    }
    // Only clusterPermissions are cluster-wide.
    assert_eq!(find(&out, "ClusterRole").len(), 1);
    let deployment = find(&out, "Deployment")[0];
    assert_eq!(deployment.key.namespace.as_deref(), Some("ops"));
    let annotations = &deployment.manifest["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["olm.targetNamespaces"], "team-a,team-b");
    assert_eq!(annotations["olm.operatorNamespace"], "ops");
}

#[test]
fn a_mode_the_csv_does_not_support_is_a_mode_error_naming_both() {
    let only_single = bundle(&[
        supporting(&["SingleNamespace"]),
        crd("apiextensions.k8s.io/v1"),
    ]);
    assert!(matches!(
        objects(&only_single),
        Err(RegistryError::Mode(ModeError::NoDefault { .. }))
    ));
    let all = Settings {
        namespace: None,
        watch: Some(vec![String::new()]),
        deployment: None,
        ..Settings::default()
    };
    let refused = objects_for(&only_single, &all).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "unsupported install mode: AllNamespaces (watching all namespaces) is not supported by \
         this bundle's ClusterServiceVersion (it supports SingleNamespace)"
    );
}

#[test]
fn webhooks_and_api_services_render_with_the_services_that_serve_them() {
    let mut c = csv();
    c["spec"]["webhookdefinitions"] = json!([{"type": "ValidatingAdmissionWebhook",
        "generateName": "vwidget.example.com", "deploymentName": "widget-manager",
        "containerPort": 443, "targetPort": 9443, "sideEffects": "None",
        "admissionReviewVersions": ["v1"]}]);
    c["spec"]["apiservicedefinitions"] = json!({"owned": [{"group": "metrics.example.com",
        "version": "v1beta1", "kind": "Reading", "name": "readings",
        "deploymentName": "widget-manager", "containerPort": 6443}]});
    let rendered = render(
        &bundle(&[c, crd("apiextensions.k8s.io/v1")]),
        &Settings::default(),
    )
    .unwrap();
    let names: Vec<String> = rendered
        .objects
        .iter()
        .map(|o| format!("{} {}", o.key.kind, o.key.name))
        .collect();
    for wanted in [
        "ValidatingWebhookConfiguration vwidget.example.com",
        "Service widget-manager-service",
        "APIService v1beta1.metrics.example.com",
        "ClusterRoleBinding widget-manager-service-system:auth-delegator",
        "RoleBinding widget-manager-service-auth-reader",
    ] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    let service = rendered
        .objects
        .iter()
        .find(|o| o.key.kind == "Service")
        .unwrap();
    assert_eq!(
        service.manifest["spec"],
        json!({"ports": [
            {"name": "443", "port": 443, "targetPort": 9443},
            {"name": "6443", "port": 6443, "targetPort": 6443}],
            "selector": {"app": "widget"}})
    );
    let reader = rendered
        .objects
        .iter()
        .find(|o| o.key.kind == "RoleBinding" && o.key.name.ends_with("auth-reader"))
        .unwrap();
    assert_eq!(reader.key.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        reader.manifest["subjects"],
        json!([{"kind": "ServiceAccount", "name": "widget-runner", "namespace": "widget-system"}])
    );
    assert_eq!(
        rendered.serving,
        [Serving {
            deployment: "widget-manager".into(),
            service: "widget-manager-service".into(),
            secret: "widget-manager-service-cert".into(),
            namespace: "widget-system".into(),
        }]
    );
}

#[test]
fn what_is_not_installed_says_what_is_missing() {
    let mut strategy = csv();
    strategy["spec"]["install"]["strategy"] = json!("helm");
    assert!(refused(&bundle(&[strategy, crd("apiextensions.k8s.io/v1")])).contains("\"helm\""));
    let mut hooks = csv();
    hooks["spec"]["webhookdefinitions"] = json!([{"type": "ValidatingAdmissionWebhook",
        "generateName": "v.example.com", "deploymentName": "elsewhere"}]);
    assert_eq!(
        refused(&bundle(&[hooks, crd("apiextensions.k8s.io/v1")])),
        "invalid webhook definitions: webhook of type 'ValidatingAdmissionWebhook' with name 'v.example.com' references non-existent deployment 'elsewhere'"
    );
    let mut apis = csv();
    apis["spec"]["apiservicedefinitions"] = json!({"owned": [{"group": "metrics.example.com",
        "version": "v1", "deploymentName": "elsewhere"}]});
    assert_eq!(
        refused(&bundle(&[apis, crd("apiextensions.k8s.io/v1")])),
        "invalid APIService definitions: owned APIService \"v1.metrics.example.com\" references non-existent deployment 'elsewhere'"
    );
}

#[test]
fn objects_the_bundle_may_not_carry_are_refused() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "extra"}});
    assert_eq!(
        refused(&bundle(&[
            csv(),
            crd("apiextensions.k8s.io/v1"),
            deployment
        ])),
        "bundle contains unsupported resource: Name: extra, Kind: Deployment"
    );
    assert!(
        refused(&bundle(&[csv(), crd("apiextensions.k8s.io/v1beta1")]))
            .contains("is apiextensions.k8s.io/v1beta1")
    );
    assert_eq!(
        refused(&bundle(&[csv()])),
        "cluster service definition references owned custom resource definition 'widgets.example.com' not found in bundle"
    );
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    assert_eq!(
        refused(&bundle(&[
            csv(),
            crd("apiextensions.k8s.io/v1"),
            config.clone(),
            config
        ])),
        "ConfigMap widget-system/a is defined twice"
    );
    let broken = Tree::new()
        .file(ANNOTATIONS, ANNOTATIONS_YAML)
        .file("manifests/a.yaml", "kind: [");
    assert!(refused(&broken).starts_with("manifests/a.yaml: invalid YAML"));
    let nested = bundle(&[csv()]).dir("manifests/sub");
    assert!(refused(&nested).contains("found \"manifests/sub\""));
    let mut bad = csv();
    bad["spec"]["install"] = json!("deployment");
    assert!(
        refused(&bundle(&[bad]))
            .starts_with("the ClusterServiceVersion manifests/00.json is invalid")
    );
}

#[test]
fn a_service_account_the_bundle_ships_is_used_as_shipped() {
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "widget", "annotations": {"note": "ours"}},
        "imagePullSecrets": [{"name": "pull"}]});
    let out = converted(&[csv(), crd("apiextensions.k8s.io/v1"), account]);
    let accounts = find(&out, "ServiceAccount");
    assert_eq!(accounts.len(), 2);
    let widget = accounts
        .iter()
        .find(|a| a.key.name == "widget")
        .unwrap_or_else(|| unreachable!());
    assert_eq!(
        widget.manifest["imagePullSecrets"],
        json!([{"name": "pull"}])
    );
    assert_eq!(widget.key.namespace.as_deref(), Some("widget-system"));
}
