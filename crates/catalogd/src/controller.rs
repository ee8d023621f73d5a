//! The Catalog controller: watches Catalogs, the ConfigMaps they read (configMaps sources and
//! CA bundles) and the credential Secrets they name (a change re-unpacks exactly the Catalogs
//! that use it, at once, even during a failure's backoff), keeps a finalizer that removes
//! stored content on deletion, counts every reconcile in the controller-runtime metrics (an
//! unpack failure is a reconcile error), and reports its readiness from the health of its
//! Catalog watch.

use olm_runtime::retry::Retry;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store as Reflector};
use kube::runtime::{WatchStreamExt, watcher};
use olm_api::catalog::Catalog;
use olm_runtime::admin::ReadinessHandle;
use olm_runtime::metrics::Metrics;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::context::{Context, Memories, Parts};
use crate::reconcile::{self, Error};
use crate::source::credentials::credential_selector;
use crate::source::custom::pod::{CATALOG_ANNOTATION, GENERATOR_LABEL};

/// The finalizer upstream catalogd uses, so either can take over the other's objects.
pub const FINALIZER: &str = "catalogd.operatorframework.io/delete-server-cache";

/// Name of this controller in metrics and logs.
pub const CONTROLLER: &str = "catalog";

/// Catalogs reconciled at once: enough that one slow source does not hold up the others, few
/// enough that a restart with many large catalogs does not fetch them all at once (the unpack
/// budget bounds the memory either way).
pub const CONCURRENCY: u16 = 4;

/// An object a Catalog's source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input<'a> {
    /// A ConfigMap (a configMaps source entry, or an http CA bundle).
    ConfigMap {
        /// Its namespace.
        namespace: &'a str,
        /// Its name.
        name: &'a str,
    },
    /// A Secret in catalogd's namespace (an http auth Secret, an image pull secret).
    Secret {
        /// Its name.
        name: &'a str,
    },
}

/// The Catalogs (of `catalogs`) whose source reads `input`; ConfigMaps without a namespace,
/// CA bundles and Secrets are in `own_namespace`.
pub fn readers(
    catalogs: &[Arc<Catalog>],
    own_namespace: &str,
    input: Input<'_>,
) -> Vec<ObjectRef<Catalog>> {
    catalogs
        .iter()
        .filter(|c| {
            let source = &c.spec.source;
            match input {
                Input::ConfigMap { namespace, name } => {
                    let in_source = source.config_maps.iter().flatten().any(|e| {
                        e.config_map.name == name
                            && e.config_map.namespace.as_deref().unwrap_or(own_namespace)
                                == namespace
                    });
                    let http_ca = source.http.as_ref().and_then(|h| h.ca_bundle.as_ref());
                    let git_ca = source.git.as_ref().and_then(|g| g.ca_bundle.as_ref());
                    let ca = [http_ca, git_ca]
                        .into_iter()
                        .flatten()
                        .any(|ca| ca.config_map == name && namespace == own_namespace);
                    in_source || ca
                }
                Input::Secret { name } => {
                    let http = source
                        .http
                        .as_ref()
                        .and_then(|h| h.auth_secret.as_ref())
                        .is_some_and(|s| s.name == name);
                    let pull = source
                        .image
                        .as_ref()
                        .and_then(|i| i.pull_secret.as_deref())
                        .is_some_and(|s| s == name);
                    let git = source
                        .git
                        .as_ref()
                        .and_then(|g| g.auth_secret.as_ref())
                        .is_some_and(|s| s.name == name);
                    http || pull || git
                }
            }
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The Catalog a generator Pod runs for (named in its annotation).
pub fn generator_of(pod: &Pod) -> Option<ObjectRef<Catalog>> {
    pod.annotations()
        .get(CATALOG_ANNOTATION)
        .map(|name| ObjectRef::new(name))
}

/// Builds the controller and its context. `config_map_namespaces` are the namespaces whose
/// ConfigMaps Catalogs may read (catalogd's own first); `ready` follows the Catalog watch.
pub fn build(
    parts: Parts,
    own_namespace: &str,
    config_map_namespaces: &[String],
    ready: ReadinessHandle,
) -> (Controller<Catalog>, Context) {
    let client = parts.client.clone();
    let (reader, writer) = reflector::store();
    // Ready while the watch is healthy: after its initial list, and again after each re-list
    // that follows an error (a watch that cannot reach the API server is not ready).
    let catalogs = watcher(
        Api::<Catalog>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .inspect(move |event| ready.follow("Catalog", event))
    .reflect(writer)
    .applied_objects();
    let mut controller = Controller::for_stream(catalogs, reader.clone());
    let memory = Arc::new(Memories::default());
    let trigger = |reader: Reflector<Catalog>, memory: Arc<Memories>, own: String| {
        move |input: Input<'_>| {
            let refs = readers(&reader.state(), &own, input);
            memory.inputs_changed(&refs);
            refs
        }
    };
    for ns in config_map_namespaces {
        let map = trigger(reader.clone(), memory.clone(), own_namespace.to_owned());
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        controller = controller.watches(api, watcher::Config::default(), move |cm: ConfigMap| {
            map(Input::ConfigMap {
                namespace: cm.namespace().as_deref().unwrap_or_default(),
                name: &cm.name_any(),
            })
        });
    }
    // Only Secrets that opted in as credentials are watched (and so ever held in memory).
    let map = trigger(reader.clone(), memory.clone(), own_namespace.to_owned());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), own_namespace);
    controller = controller.watches(
        secrets,
        watcher::Config::default().labels(&credential_selector()),
        move |s: Secret| {
            map(Input::Secret {
                name: &s.name_any(),
            })
        },
    );
    // A generator Pod's every change is a step of its Catalog's run.
    let pods: Api<Pod> = Api::namespaced(client, own_namespace);
    controller = controller.watches(
        pods,
        watcher::Config::default().labels(&format!("{GENERATOR_LABEL}=true")),
        |p: Pod| generator_of(&p),
    );
    let ctx = Context::new(parts, reader, memory);
    (controller, ctx)
}

async fn reconcile(
    catalog: Arc<Catalog>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
    let ctx = ctx.as_ref();
    let api: Api<Catalog> = Api::all(ctx.parts.client.clone());
    let span = tracing::info_span!("reconcile", catalog = %catalog.name_any());
    finalizer(&api, FINALIZER, catalog, |event| async move {
        match event {
            Finalizer::Apply(c) => reconcile::apply(c, ctx).await,
            Finalizer::Cleanup(c) => reconcile::cleanup(c, ctx).await,
        }
    })
    .instrument(span)
    .await
}

/// How long a failed reconcile of a Catalog waits (other than an unpack's).
const RETRY: Retry = Retry::Fixed(Duration::from_secs(10));

/// How long a reconcile that failed with `error` waits: an unpack on its source's backoff, kept
/// in the status (see `olm_runtime::retry` for why it is the source's); anything else `wait`,
/// the controller's.
fn retry_of(error: &kube::runtime::finalizer::Error<Error>, wait: Duration) -> Duration {
    match error {
        kube::runtime::finalizer::Error::ApplyFailed(Error::Unpack { retry, .. }) => *retry,
        _ => wait,
    }
}

fn error_policy(
    catalog: Arc<Catalog>,
    error: &kube::runtime::finalizer::Error<Error>,
    wait: Duration,
) -> Action {
    let retry = retry_of(error, wait);
    if !matches!(
        error,
        kube::runtime::finalizer::Error::ApplyFailed(Error::Unpack { .. })
    ) {
        tracing::warn!(catalog = %catalog.name_any(), %error, ?retry, "reconcile failed; retrying");
    }
    Action::requeue(retry)
}

/// Runs the controller until `shutdown` is cancelled, every reconcile counted.
pub async fn run(
    controller: Controller<Catalog>,
    ctx: Context,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    olm_runtime::controller::Run {
        name: CONTROLLER,
        concurrency: CONCURRENCY,
        metrics,
        shutdown,
        retry: RETRY,
    }
    .run(controller, reconcile, error_policy, Arc::new(ctx))
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::catalog::{
        CaBundleRef, CatalogSpec, ConfigMapRef, ConfigMapSource, HttpSource, SecretRef, Source,
        SourceType,
    };

    fn catalog(name: &str, source: Source) -> Arc<Catalog> {
        Arc::new(Catalog::new(
            name,
            CatalogSpec {
                source,
                priority: 0,
            },
        ))
    }

    fn empty(type_: SourceType) -> Source {
        Source {
            type_,
            image: None,
            config_maps: None,
            http: None,
            git: None,
            custom: None,
        }
    }

    fn names(refs: Vec<ObjectRef<Catalog>>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn a_changed_input_maps_to_exactly_the_catalogs_that_read_it() {
        let cms = |ns: Option<&str>| Source {
            config_maps: Some(vec![ConfigMapSource {
                config_map: ConfigMapRef {
                    name: "cm".into(),
                    namespace: ns.map(Into::into),
                },
                path: None,
            }]),
            ..empty(SourceType::ConfigMaps)
        };
        let http = Source {
            http: Some(HttpSource {
                url: "https://h/c.json".into(),
                auth_secret: Some(SecretRef {
                    name: "creds".into(),
                }),
                ca_bundle: Some(CaBundleRef {
                    config_map: "ca".into(),
                    key: None,
                }),
                ..Default::default()
            }),
            ..empty(SourceType::Http)
        };
        let image = Source {
            image: Some(olm_api::catalog::ImageSource {
                r#ref: "r.io/c:1".into(),
                pull_secret: Some("pull".into()),
                ..Default::default()
            }),
            ..empty(SourceType::Image)
        };
        let git = Source {
            git: Some(olm_api::catalog::GitSource {
                repository: "https://h/r.git".into(),
                auth_secret: Some(SecretRef {
                    name: "git-creds".into(),
                }),
                ca_bundle: Some(CaBundleRef {
                    config_map: "git-ca".into(),
                    key: None,
                }),
                ..Default::default()
            }),
            ..empty(SourceType::Git)
        };
        let all = vec![
            catalog("repo", git),
            catalog("own", cms(None)),
            catalog("other", cms(Some("team"))),
            catalog("web", http),
            catalog("img", image),
        ];
        let cm = |namespace, name| Input::ConfigMap { namespace, name };
        assert_eq!(names(readers(&all, "olm", cm("olm", "cm"))), ["own"]);
        assert_eq!(names(readers(&all, "olm", cm("team", "cm"))), ["other"]);
        assert_eq!(names(readers(&all, "olm", cm("olm", "ca"))), ["web"]);
        assert!(readers(&all, "olm", cm("team", "ca")).is_empty());
        assert_eq!(
            names(readers(&all, "olm", Input::Secret { name: "creds" })),
            ["web"]
        );
        assert_eq!(
            names(readers(&all, "olm", Input::Secret { name: "pull" })),
            ["img"]
        );
        assert!(readers(&all, "olm", Input::Secret { name: "cm" }).is_empty());
        assert_eq!(
            names(readers(&all, "olm", Input::Secret { name: "git-creds" })),
            ["repo"]
        );
        assert_eq!(names(readers(&all, "olm", cm("olm", "git-ca"))), ["repo"]);
    }

    #[test]
    fn unpack_failures_retry_on_their_backoff_and_other_errors_after_10_s() {
        let unpack = kube::runtime::finalizer::Error::ApplyFailed(Error::Unpack {
            reason: "InvalidContent",
            message: "bad".into(),
            retry: Duration::from_secs(40),
        });
        assert_eq!(
            retry_of(&unpack, Duration::from_secs(10)),
            Duration::from_secs(40)
        );
        let store = kube::runtime::finalizer::Error::ApplyFailed(Error::Store("disk".into()));
        assert_eq!(
            retry_of(&store, Duration::from_secs(10)),
            Duration::from_secs(10)
        );
        assert_eq!(RETRY, Retry::Fixed(Duration::from_secs(10)));
    }
}
