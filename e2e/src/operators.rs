//! Helpers for tests of operator-controller: small catalogs, Operators labelled for the test's
//! clean-up (and selecting only the test's own Catalogs, so parallel tests do not see each
//! other's packages), waits on their conditions and BundleDeployments.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::conditions::find_condition;
use olm_api::operator::Operator;
use serde_json::json;

use crate::context::{E2E_LABEL, TestContext};
use crate::wait::wait_for;
use crate::{Error, Result, kube_err};

/// How long an Operator may take to reach a state.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// An `olm.package` blob.
pub fn package_doc(package: &str, default_channel: &str) -> String {
    format!("---\nschema: olm.package\nname: {package}\ndefaultChannel: {default_channel}\n")
}

/// An `olm.channel` blob; each entry is `(version, replaces-version, skipRange)`.
pub fn channel_doc(
    package: &str,
    name: &str,
    entries: &[(&str, Option<&str>, Option<&str>)],
) -> String {
    let mut s = format!("---\nschema: olm.channel\npackage: {package}\nname: {name}\nentries:\n");
    for (v, replaces, skip_range) in entries {
        s.push_str(&format!("- name: {package}.v{v}\n"));
        if let Some(r) = replaces {
            s.push_str(&format!("  replaces: {package}.v{r}\n"));
        }
        if let Some(r) = skip_range {
            s.push_str(&format!("  skipRange: '{r}'\n"));
        }
    }
    s
}

/// An `olm.bundle` blob with image `example.com/<package>:v<version>` (or `-<tag>` added) and
/// `extra` property list items.
pub fn bundle_doc(package: &str, version: &str, tag: &str, extra: &str) -> String {
    format!(
        "---\nschema: olm.bundle\npackage: {package}\nname: {package}.v{version}\nimage: {}\nproperties:\n- type: olm.package\n  value: {{packageName: {package}, version: {version}}}\n{extra}",
        bundle_image(package, version, tag)
    )
}

/// A catalog of one package `package` with one bundle, 1.0.0, in its channel `stable`.
pub fn one_bundle_catalog(package: &str) -> String {
    [
        package_doc(package, "stable"),
        channel_doc(package, "stable", &[("1.0.0", None, None)]),
        bundle_doc(package, "1.0.0", "", ""),
    ]
    .concat()
}

/// The image [`bundle_doc`] gives a bundle.
pub fn bundle_image(package: &str, version: &str, tag: &str) -> String {
    format!("example.com/{package}:v{version}{tag}")
}

/// Creates the Operator `name` with `spec`; without a catalogSelector it selects the test's
/// own Catalogs.
pub async fn create_operator(
    ctx: &TestContext,
    name: &str,
    mut spec: serde_json::Value,
) -> Result<Api<Operator>> {
    if spec.get("catalogSelector").is_none() {
        spec["catalogSelector"] = json!({"matchLabels": {E2E_LABEL: ctx.namespace}});
    }
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let op: Operator = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "operators.operatorframework.io/v1alpha1", "kind": "Operator",
        "metadata": {"name": name}, "spec": spec
    })))
    .map_err(|e| Error::Document(e.to_string()))?;
    api.create(&PostParams::default(), &op)
        .await
        .map_err(kube_err(format!("creating Operator {name}")))?;
    Ok(api)
}

/// Merges `spec` into the Operator's spec.
pub async fn patch_spec(api: &Api<Operator>, name: &str, spec: serde_json::Value) -> Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .map_err(kube_err(format!("patching Operator {name}")))?;
    Ok(())
}

/// `(status, reason, message)` of the Operator's condition `type_` (empty when absent).
pub fn cond(op: Option<&Operator>, type_: &str) -> (String, String, String) {
    op.and_then(|o| o.status.as_ref())
        .and_then(|s| find_condition(&s.conditions, type_))
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// Waits until the Operator's status describes its current generation and `pred` holds.
pub async fn wait_operator(
    api: &Api<Operator>,
    name: &str,
    what: &str,
    pred: impl Fn(&Operator) -> bool + Send + 'static,
) -> Result<Operator> {
    wait_for(api, name, what, DEADLINE, move |o| {
        o.is_some_and(|o| {
            o.status.as_ref().and_then(|s| s.observed_generation) == o.metadata.generation
                && pred(o)
        })
    })
    .await
}

/// Waits until the Operator is `Resolved=<status>` with `reason`.
pub async fn wait_resolved(
    api: &Api<Operator>,
    name: &str,
    status: &'static str,
    reason: &'static str,
) -> Result<Operator> {
    wait_operator(
        api,
        name,
        &format!("Resolved={status} {reason}"),
        move |o| {
            let (s, r, _) = cond(Some(o), "Resolved");
            s == status && r == reason
        },
    )
    .await
}

/// The image of a BundleDeployment's source.
pub fn bd_image(bd: Option<&BundleDeployment>) -> Option<String> {
    bd.and_then(|b| b.spec.template.spec.source.image.as_ref())
        .map(|i| i.r#ref.clone())
}

/// Waits until the BundleDeployment `name` exists with source image `image`.
pub async fn wait_bd_image(ctx: &TestContext, name: &str, image: &str) -> Result<BundleDeployment> {
    let api: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let image = image.to_owned();
    wait_for(&api, name, &format!("image {image}"), DEADLINE, move |bd| {
        bd_image(bd).as_deref() == Some(image.as_str())
    })
    .await
}

/// Runs `operator-controller explain` with `args`, as `oc`'s ServiceAccount.
pub fn explain(
    oc: &crate::manager::OperatorController,
    args: &[&str],
) -> Result<std::process::Output> {
    let binary = crate::binary("operator-controller")?;
    std::process::Command::new(&binary)
        .arg("explain")
        .args(args)
        .env("KUBECONFIG", &oc.kubeconfig)
        .output()
        .map_err(|source| Error::Io {
            path: binary.display().to_string(),
            source,
        })
}

/// The condition `type_` of the BundleDeployment `bd`: (status, reason, message).
pub fn bd_condition(
    bd: Option<&BundleDeployment>,
    type_: &str,
) -> Option<(String, String, String)> {
    let c = bd?
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}
