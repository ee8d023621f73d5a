//! Per-test context: a client and a namespace of the test's own.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::{Result, cluster, kube_err};

/// Label on every namespace the harness creates, so leftovers are easy to find.
pub const E2E_LABEL: &str = "olm-rs.io/e2e";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// What a test works in: an admin client and its own namespace. Cluster-scoped objects a test
/// creates should be named with [`TestContext::name`] so tests never collide.
pub struct TestContext {
    /// Admin client, made in the test's own runtime.
    pub client: Client,
    /// The test's namespace.
    pub namespace: String,
}

impl TestContext {
    /// Starts (or finds) the control plane and creates a namespace for the test `test`.
    pub async fn new(test: &str) -> Result<Self> {
        let cluster = cluster::cluster()?;
        let client = cluster.client().await?;
        let namespace = unique_name(test);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(E2E_LABEL.to_owned(), "true".to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {namespace}")))?;
        Ok(Self { client, namespace })
    }

    /// A name for a cluster-scoped object that no other test uses.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.namespace)
    }

    /// Deletes the test's namespace (and so everything in it). Call at the end of a passing
    /// test; a failing test leaves its namespace for debugging until the cluster stops.
    pub async fn cleanup(self) -> Result<()> {
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::background())
            .await
            .map_err(kube_err(format!("deleting namespace {}", self.namespace)))?;
        Ok(())
    }
}

/// `e2e-<test>-<n><pid>`, shortened to a valid namespace name.
fn unique_name(test: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(30)
        .collect();
    let name = format!(
        "e2e-{}-{n}{}",
        slug.trim_matches('-'),
        std::process::id() % 10_000
    );
    name.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_valid_and_distinct() {
        let a = super::unique_name("Some_Test::with weird chars and a very long name indeed");
        let b = super::unique_name("Some_Test::with weird chars and a very long name indeed");
        assert_ne!(a, b);
        for n in [a, b] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
        }
    }
}
