//! Helpers for tests of catalogd: catalog content, ConfigMaps and Catalogs labelled for the
//! test's clean-up, waits on their conditions, and reading catalogd's metrics.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_api::catalog::{Catalog, CatalogStatus, Phase};
use olm_api::conditions::find_condition;
use serde_json::json;

use crate::context::TestContext;
use crate::manager::OLM_NAMESPACE;
use crate::wait::wait_for;
use crate::{Error, Result, kube_err};

/// How long a Catalog may take to reach a state.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The example catalog (one bundle, 0.1.0) as one line of JSON blobs, as a generator would
/// print it.
pub const EXAMPLE_CATALOG_JSON: &str = concat!(
    r#"{"schema":"olm.package","name":"example-operator","defaultChannel":"stable"}"#,
    r#"{"schema":"olm.channel","name":"stable","package":"example-operator","entries":[{"name":"example-operator.v0.1.0"}]}"#,
    r#"{"schema":"olm.bundle","name":"example-operator.v0.1.0","package":"example-operator","image":"quay.io/olmtest/example-operator-bundle:v0.1.0","properties":[{"type":"olm.package","value":{"packageName":"example-operator","version":"0.1.0"}}]}"#
);

/// The `example-operator` catalog of upstream catalogd's ConfigMap demo, at `version`.
pub fn example_catalog(version: &str) -> String {
    format!(
        "---\nschema: olm.package\nname: example-operator\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: example-operator\nentries:\n- name: example-operator.v{version}\n---\nschema: olm.bundle\nname: example-operator.v{version}\npackage: example-operator\nimage: quay.io/olmtest/example-operator-bundle:v{version}\nproperties:\n- type: olm.package\n  value:\n    packageName: example-operator\n    version: {version}\n"
    )
}

/// Creates or replaces the ConfigMap `name` in catalogd's namespace with `data`.
pub async fn put_configmap(ctx: &TestContext, name: &str, data: serde_json::Value) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let cm = ctx.labelled(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": OLM_NAMESPACE},
        "data": data
    }));
    api.patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&cm))
        .await
        .map_err(kube_err(format!("applying ConfigMap {name}")))?;
    Ok(())
}

/// Puts `content` in the ConfigMap `name` under the key `catalog.yaml`.
pub async fn put_catalog_configmap(ctx: &TestContext, name: &str, content: &str) -> Result<()> {
    put_configmap(ctx, name, json!({ "catalog.yaml": content })).await
}

/// Says where the credential Secret `name` of catalogd's namespace may be sent: its
/// `olm-rs.io/credential-hosts` annotation (hosts or URL prefixes).
pub async fn scope_secret(ctx: &TestContext, name: &str, hosts: &str) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"metadata": {"annotations": {"olm-rs.io/credential-hosts": hosts}}}),
        ),
    )
    .await
    .map_err(|source| Error::Kube {
        context: format!("annotating Secret {name}"),
        source,
    })?;
    Ok(())
}

/// Creates the Catalog `name` with `source`, labelled for the test's clean-up.
pub async fn create_catalog(
    ctx: &TestContext,
    name: &str,
    source: serde_json::Value,
) -> Result<Api<Catalog>> {
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let c: Catalog = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": name}, "spec": {"source": source}
    })))
    .map_err(|e| Error::Document(e.to_string()))?;
    api.create(&PostParams::default(), &c)
        .await
        .map_err(kube_err(format!("creating Catalog {name}")))?;
    Ok(api)
}

/// Puts `content` in the ConfigMap `cm`, creates the Catalog `name` reading it, and waits until
/// it is unpacked.
pub async fn unpacked_configmap_catalog(
    ctx: &TestContext,
    name: &str,
    cm: &str,
    content: &str,
) -> Result<(Api<Catalog>, Catalog)> {
    put_catalog_configmap(ctx, cm, content).await?;
    let api = create_catalog(ctx, name, configmap_source(cm)).await?;
    let catalog = wait_unpacked(&api, name, None).await?;
    Ok((api, catalog))
}

/// The message of the Catalog's `Unpacked` condition (empty when it has none).
pub fn unpacked_message(c: &Catalog) -> String {
    c.status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, "Unpacked"))
        .map(|u| u.message.clone())
        .unwrap_or_default()
}

/// A `configMaps` source reading the ConfigMap `cm` of catalogd's namespace.
pub fn configmap_source(cm: &str) -> serde_json::Value {
    json!({"type": "configMaps", "configMaps": [{"configMap": {"name": cm}}]})
}

/// The status of a Catalog as a wait sees it.
pub fn status(c: Option<&Catalog>) -> CatalogStatus {
    c.and_then(|c| c.status.clone()).unwrap_or_default()
}

/// Waits until the catalog is unpacked at its current generation with a content hash other
/// than `not`.
pub async fn wait_unpacked(api: &Api<Catalog>, name: &str, not: Option<&str>) -> Result<Catalog> {
    let not = not.map(str::to_owned);
    wait_for(
        api,
        name,
        "Unpacked=True with new content",
        DEADLINE,
        move |c| {
            let s = status(c);
            s.phase == Some(Phase::Unpacked)
                && s.observed_generation == c.and_then(|c| c.metadata.generation)
                && find_condition(&s.conditions, "Unpacked").is_some_and(|u| u.status == "True")
                && s.content_hash.is_some()
                && s.content_hash != not
        },
    )
    .await
}

/// Waits until the catalog's `Unpacked` condition is False with `reason`.
pub async fn wait_reason(api: &Api<Catalog>, name: &str, reason: &'static str) -> Result<Catalog> {
    wait_for(api, name, reason, DEADLINE, move |c| {
        find_condition(&status(c).conditions, "Unpacked")
            .is_some_and(|u| u.status == "False" && u.reason == reason)
    })
    .await
}

/// Waits for a poll recorded after `after` (by `last_poll`, which reads a source's
/// `lastPollAttempt`); returns its time.
pub async fn wait_poll_after(
    api: &Api<Catalog>,
    name: &str,
    after: Option<String>,
    last_poll: fn(Option<&Catalog>) -> Option<String>,
) -> Result<Option<String>> {
    let c = wait_for(api, name, "a new poll", DEADLINE, move |c| {
        let polled = last_poll(c);
        polled.is_some() && polled != after
    })
    .await?;
    Ok(last_poll(Some(&c)))
}

/// The value of the metric sample `name{labels}` (labels as written in the exposition, e.g.
/// `controller="catalog"`, in any order) on catalogd's admin server; 0 when absent.
pub async fn metric(admin_url: &str, name: &str, labels: &[&str]) -> Result<f64> {
    let text = reqwest::get(format!("{admin_url}/metrics"))
        .await
        .map_err(|e| Error::Cluster(format!("GET /metrics: {e}")))?
        .text()
        .await
        .map_err(|e| Error::Cluster(format!("GET /metrics: {e}")))?;
    Ok(sample(&text, name, labels).unwrap_or(0.0))
}

/// Waits (at most `deadline`) until the metric sample `name{labels}` on `admin_url` satisfies
/// `done`; `what` names the wait in the failure.
pub async fn wait_metric(
    admin_url: &str,
    name: &str,
    labels: &[&str],
    what: &str,
    done: impl Fn(f64) -> bool,
) -> Result<f64> {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let value = metric(admin_url, name, labels).await.unwrap_or(0.0);
        if done(value) {
            return Ok(value);
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                seconds: DEADLINE.as_secs(),
                last_state: format!("{name} = {value}"),
            });
        }
        // Polling a metric, bounded by the deadline above.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value of `name{labels}` in a Prometheus text exposition.
pub fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(series, _)| {
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            metric == name && labels.iter().all(|label| rest.contains(label))
        })
        .and_then(|(_, value)| value.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn samples_are_found_by_name_and_labels() {
        let text = "# HELP x\nx_total{a=\"1\",b=\"2\"} 3\nx_total{a=\"9\"} 4\ny 5\n";
        assert_eq!(
            super::sample(text, "x_total", &["b=\"2\"", "a=\"1\""]),
            Some(3.0)
        );
        assert_eq!(super::sample(text, "x_total", &["a=\"9\""]), Some(4.0));
        assert_eq!(super::sample(text, "y", &[]), Some(5.0));
        assert_eq!(super::sample(text, "x", &[]), None);
    }
}
