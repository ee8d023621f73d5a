//! One reconcile of a BundleDeployment: the [`plan`] carried out. Content is fetched once per
//! template and its objects kept in memory as compact text (a resync re-applies them, undoing
//! drift, without fetching again; reading and parsing take a share of the unpack budget); the status is written with server-side apply, only when it changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use olm_puller::budget::Share;
use olm_runtime::{EventPublisher, EventType};
use serde_json::json;

use crate::apply::{Applier, ApplyError};
use crate::certs::{Certs, Injection};
use crate::crd_safety::preflight::PreflightError;
use crate::drift::Drift;
use crate::fetch::Fetcher;
use crate::format::registry::{self, Serving};
use crate::health::{Health, Read};
use crate::kinds::Allowed;
use crate::marks::Owner;
use crate::metrics::ProvisionerMetrics;
use crate::object::{Key, Object, Stored};
use crate::plan::{FINALIZER, Plan, installed_of, plan};
use crate::render::Renderer;
use crate::set::Set;
use crate::settings::Settings;
use crate::source::{Format, Wanted};
use crate::status::{Attempt, Installed, reasons};

mod certs;
mod dry_run;
mod memory;

pub use memory::{Held, Memory};
mod report;

/// How often an installed BundleDeployment is looked at again by default
/// (`--resync-interval-seconds`).
pub const RESYNC: Duration = Duration::from_secs(600);
/// How soon a failed install is tried again (a dependency may arrive later).
pub const RETRY: Duration = Duration::from_secs(30);

/// The field manager of the finalizer: its own, because an apply states all of a manager's
/// fields, and the finalizer is written apart from the ApplySet record on the same object.
pub const FINALIZER_MANAGER: &str = "olm-provisioner-finalizer";

/// What every reconcile shares.
pub struct Context {
    /// The client (writes fail unless this replica leads).
    pub client: Client,
    /// Applies objects and keeps the applied sets.
    pub applier: Applier,
    /// Fetches templates' content.
    pub fetcher: Fetcher,
    /// Events about BundleDeployments.
    pub events: EventPublisher,
    /// What is remembered of each BundleDeployment between reconciles.
    pub memory: Memory,
    /// The kinds bundles may hold.
    pub allowed: Allowed,
    /// The provisioner's own metric families.
    pub metrics: ProvisionerMetrics,
    /// What each set was applied at, and the watches that tell when it drifted.
    pub drift: Drift,
    /// How often an installed BundleDeployment is looked at again without a trigger.
    pub resync: Duration,
    /// How serving certificates are issued.
    pub certs: Certs,
    /// Renders Helm charts and kustomizations.
    pub renderer: Renderer,
}

impl Context {
    /// A context with nothing held yet.
    #[allow(clippy::too_many_arguments)] // each part is made apart, by the manager
    pub fn new(
        client: Client,
        applier: Applier,
        fetcher: Fetcher,
        events: EventPublisher,
        allowed: Allowed,
        metrics: ProvisionerMetrics,
        drift: Drift,
        certs: Certs,
        renderer: Renderer,
    ) -> Context {
        Context {
            client,
            applier,
            fetcher,
            events,
            memory: Memory::default(),
            allowed,
            metrics,
            drift,
            resync: RESYNC,
            certs,
            renderer,
        }
    }

    /// Forgets everything of `bd` (it is uninstalled): what is remembered of it, its count of
    /// managed objects, and what its drift watches knew (watches no set uses stop).
    fn forget(&self, bd: &str) {
        self.memory.forget(bd);
        let _ = self.metrics.managed_objects.remove_label_values(&[bd]);
        self.drift.state().forget(bd);
        self.drift.stop_unused();
    }

    /// This context, resyncing every `every`.
    pub fn resync_every(mut self, every: Duration) -> Context {
        self.resync = every;
        self
    }
}

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the BundleDeployment (finalizer, status) failed.
    #[error("{what}: {source}")]
    Write {
        /// What was written.
        what: &'static str,
        /// The client error.
        source: kube::Error,
    },
    /// Removing what was applied failed; the finalizer stays.
    #[error("uninstalling: {0}")]
    Uninstall(ApplyError),
}

/// Reconciles `bd`.
pub async fn reconcile(bd: Arc<BundleDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = bd.name_any();
    let owner = Owner {
        name: name.clone(),
        uid: bd.uid().unwrap_or_default(),
    };
    match plan(&bd) {
        Plan::Ignore | Plan::Gone => Ok(Action::await_change()),
        Plan::AddFinalizer => {
            set_finalizer(&ctx.client, &name, true).await?;
            // The write is a change: the next reconcile installs.
            Ok(Action::await_change())
        }
        Plan::Uninstall => {
            let removed = match Set::of(&ctx.applier, &owner).remove_all().await {
                Ok(removed) => removed,
                Err(e) => {
                    report::uninstall_failed(&ctx, &bd, &e.to_string()).await;
                    return Err(Error::Uninstall(e));
                }
            };
            for kept in &removed.kept {
                report::kept(&ctx, &bd, kept, "Uninstall").await;
            }
            ctx.forget(&name);
            set_finalizer(&ctx.client, &name, false).await?;
            Ok(Action::await_change())
        }
        Plan::Refuse { refusal, wanted } => {
            let attempt = Attempt::Invalid {
                reason: refusal.reason,
                message: refusal.message.clone(),
            };
            report::write_status(
                &ctx,
                &bd,
                installed_of(&bd).as_ref(),
                &wanted,
                &attempt,
                None,
                None,
            )
            .await?;
            Ok(Action::await_change())
        }
        Plan::Install {
            format,
            source,
            wanted,
            settings,
        } => {
            if dry_run::requested(&bd) {
                dry_run::run(&ctx, &bd, &owner, format, &source, &wanted, &settings).await?;
                return Ok(Action::requeue(ctx.resync));
            }
            dry_run::clear(&ctx, &bd).await?;
            let before = installed_of(&bd);
            let (attempt, certs_due) =
                install(&ctx, &bd, &owner, format, &source, &wanted, &settings).await;
            let fetched = ctx.memory.resolved(&name, &wanted.bundle);
            ctx.metrics
                .results
                .with_label_values(&[attempt.reason()])
                .inc();
            let retry = !matches!(attempt, Attempt::Applied);
            // Health is looked at after every apply; a change of a workload's status moves its
            // resourceVersion, which the drift watches see, so it is looked at again then.
            let health = match attempt {
                Attempt::Applied => Some(health(&ctx, &name).await),
                _ => None,
            };
            let changed = report::write_status(
                &ctx,
                &bd,
                before.as_ref(),
                &wanted,
                &attempt,
                fetched.as_deref(),
                health.as_ref(),
            )
            .await?;
            if changed {
                report::announce(&ctx, &bd, before.as_ref(), &wanted, &attempt).await;
            }
            let mut every = if retry { RETRY } else { ctx.resync };
            if let Some(Health::Unhealthy { key, .. }) = &health
                && key.group.is_empty()
                && key.kind == "Service"
            {
                every = every.min(ENDPOINTS_AGAIN);
            }
            // A certificate step falls due before then: looked at again when it does.
            Ok(Action::requeue(
                certs_due.map_or(every, |due| due.min(every)),
            ))
        }
    }
}

/// Whether `key` is the Service in front of a Deployment of `serving`.
fn serves(serving: &[Serving], key: &Key) -> bool {
    key.group.is_empty()
        && key.kind == "Service"
        && serving.iter().any(|s| {
            key.namespace.as_deref() == Some(s.namespace.as_str()) && key.name == s.service
        })
}

/// How soon a Service without a ready endpoint is looked at again: endpoints move without
/// anything the drift watches see.
const ENDPOINTS_AGAIN: Duration = Duration::from_secs(3);

/// The health of what `bd` has applied: each looked-at object read from the API server
/// unless the drift watches see it still at the version it was last read at (one that cannot
/// be read counts as unhealthy, saying why).
async fn health(ctx: &Context, bd: &str) -> Health {
    let targets = ctx.memory.health_targets(bd);
    let before = ctx.memory.take_health_reads(bd);
    let mut reads = HashMap::with_capacity(targets.len());
    let mut verdicts = Vec::with_capacity(targets.len());
    for target in targets {
        // A Service's endpoints, not the Service, say whether it answers; they are read each
        // time (the Service does not move when they do).
        if target.key.group.is_empty() && target.key.kind == "Service" {
            let verdict = match &target.key.namespace {
                Some(ns) => service_endpoints(&ctx.client, ns, &target.key.name).await,
                None => Ok(()),
            };
            verdicts.push((target.key, verdict));
            continue;
        }
        let live = ctx
            .drift
            .state()
            .live_version(&target.key)
            .map(str::to_owned);
        let earlier = before.get(&target.key);
        if let Some(verdict) = crate::health::reuse(earlier, live.as_deref()) {
            if let Some(read) = earlier {
                reads.insert(target.key.clone(), read.clone());
            }
            verdicts.push((target.key, verdict));
            continue;
        }
        let api: Api<kube::api::DynamicObject> = match &target.key.namespace {
            // Placed: cluster-scoped objects have no namespace.
            Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &target.resource),
            None => Api::all_with(ctx.client.clone(), &target.resource),
        };
        match api.get_opt(&target.key.name).await {
            Ok(object) => {
                let version = object.as_ref().and_then(|o| o.resource_version());
                let value = object.and_then(|o| serde_json::to_value(o).ok());
                let verdict = crate::health::of_held(&target.key, value.as_ref());
                if let Some(version) = version {
                    reads.insert(
                        target.key.clone(),
                        Read {
                            version,
                            verdict: verdict.clone(),
                        },
                    );
                }
                verdicts.push((target.key, verdict));
            }
            Err(e) => {
                return Health::Unhealthy {
                    key: target.key,
                    message: format!("could not be read: {e}"),
                };
            }
        }
    }
    ctx.memory.put_health_reads(bd, reads);
    crate::health::of(verdicts)
}

/// Whether the Service `name` in `namespace` has a ready endpoint.
async fn service_endpoints(client: &Client, namespace: &str, name: &str) -> crate::health::Verdict {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let params =
        kube::api::ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    match api.list(&params).await {
        Ok(list) => {
            let slices: Vec<serde_json::Value> = list
                .items
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            crate::health::endpoints(&slices)
        }
        Err(e) => Err(format!("its EndpointSlices could not be read: {e}")),
    }
}

impl From<ApplyError> for Attempt {
    fn from(e: ApplyError) -> Attempt {
        match e {
            ApplyError::Conflicts(c) => Attempt::Conflicts(crate::conflict::message(&c)),
            e @ ApplyError::NamespaceNotAllowed { .. } => Attempt::Invalid {
                reason: reasons::NAMESPACE_NOT_ALLOWED,
                message: e.to_string(),
            },
            e => Attempt::ApplyFailed(e.to_string()),
        }
    }
}

/// Fetches (unless this template's objects are held) and syncs; with how soon a certificate
/// step falls due.
async fn install(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    format: Format,
    source: &Wanted,
    wanted: &Installed,
    settings: &Settings,
) -> (Attempt, Option<Duration>) {
    // A chart's values are read each time: a Secret or ConfigMap of `valuesFrom` may have
    // changed, and other values are another render.
    let values = match values_of(ctx, format, settings).await {
        Ok(values) => values,
        Err(attempt) => return (attempt, None),
    };
    // What a chart was rendered with: its values, and the cluster `.Capabilities` told it (a
    // new API served, or an upgraded cluster, renders it again, as `helm upgrade` would).
    let values_hash = match format {
        Format::Helm => match ctx.renderer.capabilities().await {
            Ok(caps) => format!("{}-{}", crate::values::hash(&values), caps.fingerprint()),
            Err(e) => return (Attempt::UnpackFailed(e.message), None),
        },
        _ => crate::values::hash(&values),
    };
    let held = ctx.memory.held(&owner.name, &wanted.bundle, &values_hash);
    let current = installed_of(bd).as_ref() == Some(wanted);
    // Certificates first, for what is held: other ones than the set was synced with (a
    // rotation step) are a whole sync.
    let mut prepared = None;
    if let Some(h) = held.as_ref().filter(|_| current) {
        let drifted = ctx.drift.state().drifted(&owner.name);
        if let Some(drifted) = drifted {
            match certs::prepare(ctx, owner, &h.serving).await {
                Err(e) => return (e, None),
                Ok(p) if ctx.memory.synced_with(&owner.name).as_ref() == Some(&p.injection) => {
                    let attempt = restore(
                        ctx,
                        bd,
                        owner,
                        &h.objects,
                        &drifted,
                        &h.serving,
                        &p.injection,
                    )
                    .await;
                    return (attempt, p.due);
                }
                Ok(p) => prepared = Some(p),
            }
        }
    }
    let rendering = Rendering {
        format,
        settings,
        values: &values,
        values_hash,
    };
    sync(
        ctx, bd, owner, &rendering, source, wanted, held, current, prepared,
    )
    .await
}

/// A chart's values in merge order (`valuesFrom` read now, then the inline values); none for
/// other formats.
async fn values_of(
    ctx: &Context,
    format: Format,
    settings: &Settings,
) -> Result<Vec<crate::values::Layer>, Attempt> {
    if format != Format::Helm {
        return Ok(Vec::new());
    }
    let from = ctx
        .fetcher
        .values(&settings.values.from)
        .await
        .map_err(|e| match e.reason {
            // The API server could not be read: tried again, the bundle is not at fault.
            crate::status::reasons::UNPACK_FAILED => Attempt::UnpackFailed(e.message),
            reason => Attempt::Invalid {
                reason,
                message: e.message,
            },
        })?;
    Ok(crate::values::layers(&settings.values, from))
}

/// What a template's content is made into: its format, what `spec.config` asks, and a chart's
/// values with their hash.
struct Rendering<'a> {
    format: Format,
    settings: &'a Settings,
    values: &'a [crate::values::Layer],
    values_hash: String,
}

/// Fetches (unless this template's objects are held), issues certificates and syncs the whole
/// set; with how soon a certificate step falls due.
#[allow(clippy::too_many_arguments)]
async fn sync(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    rendering: &Rendering<'_>,
    source: &Wanted,
    wanted: &Installed,
    held: Option<Held>,
    current: bool,
    prepared: Option<certs::Prepared>,
) -> (Attempt, Option<Duration>) {
    let (format, settings) = (rendering.format, rendering.settings);
    // The objects parsed, within a share of the unpack budget held until they are applied.
    let (objects, serving, _share) = match held.map(|h| (h.objects, h.serving)) {
        Some((stored, serving)) => {
            let bytes = stored.iter().map(Stored::bytes).sum();
            let share = match ctx.fetcher.parse_share(bytes).await {
                Ok(share) => share,
                Err(e) => return (Attempt::UnpackFailed(e.to_string()), None),
            };
            match stored
                .iter()
                .map(Stored::object)
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(objects) => (objects, serving, share),
                Err(e) => return (Attempt::ApplyFailed(e.to_string()), None),
            }
        }
        None => {
            let timer = ctx.metrics.unpack_duration.start_timer();
            // The installed template's image again (a restart): by the digest it was installed
            // from, not by a tag that may have moved since.
            let recorded = bd
                .status
                .as_ref()
                .and_then(|s| s.resolved_source.as_ref())
                .and_then(|r| r.image_ref())
                .filter(|_| current);
            let source = crate::source::pinned(source, recorded);
            let read = read(ctx, owner, rendering, &source).await;
            timer.observe_duration();
            let (rendered, resolved, share) = match read {
                Ok(read) => read,
                Err(attempt) => return (attempt, None),
            };
            let (objects, serving) = (rendered.objects, Arc::new(rendered.serving));
            ctx.memory.hold(
                &owner.name,
                Held {
                    bundle: wanted.bundle.clone(),
                    objects: Arc::new(objects.iter().map(Stored::of).collect()),
                    serving: serving.clone(),
                    resolved,
                    values: rendering.values_hash.clone(),
                },
            );
            (objects, serving, share)
        }
    };
    let prepared = match prepared {
        Some(p) => p,
        None => match certs::prepare(ctx, owner, &serving).await {
            Ok(p) => p,
            Err(e) => return (e, None),
        },
    };
    let due = prepared.due;
    let objects = crate::certs::inject(objects, &serving, &prepared.injection);
    // What the certificates add (Secrets, Roles, cert-manager's objects) is held to the same
    // --allowed-kinds as the bundle.
    if let Err(e) = ctx.allowed.check(&objects) {
        return (
            Attempt::Invalid {
                reason: reasons::KIND_NOT_ALLOWED,
                message: e.to_string(),
            },
            due,
        );
    }
    // Forgotten until this sync succeeds: a failed one is followed by a whole sync.
    ctx.memory.synced(&owner.name, None);
    let home = match before_sync(ctx, bd, owner, format, settings, &objects).await {
        Ok(home) => home,
        Err(attempt) => return (attempt, due),
    };
    // What this sync writes, its watch may not have seen yet: health is read afresh after it.
    ctx.memory.forget_health_reads(&owner.name, None);
    let timer = ctx.metrics.apply_duration.start_timer();
    let synced = Set::of(&ctx.applier, owner)
        .sync_in(objects, home.as_deref())
        .await;
    timer.observe_duration();
    match synced {
        Ok(synced) => {
            ctx.metrics
                .managed_objects
                .with_label_values(&[&owner.name])
                .set(i64::try_from(synced.applied.len()).unwrap_or(i64::MAX));
            ctx.drift.state().remember(
                &owner.name,
                synced
                    .applied
                    .iter()
                    .map(|a| (a.key.clone(), a.version.clone())),
            );
            ctx.drift.watch(&synced.applied);
            ctx.drift.stop_unused();
            ctx.memory.set_health_targets(
                &owner.name,
                synced
                    .applied
                    .iter()
                    .filter(|a| crate::health::watched(&a.key) || serves(&serving, &a.key))
                    .cloned()
                    .collect(),
            );
            if !synced.removed.is_empty() {
                let note = format!("pruned {}", report::list(&synced.removed));
                tracing::info!(bundle_deployment = %owner.name, "{note}");
                ctx.events
                    .publish(bd, EventType::Normal, "Pruned", "Install", note)
                    .await;
            }
            for kept in &synced.kept {
                report::kept(ctx, bd, kept, "Install").await;
            }
            ctx.memory.synced(&owner.name, Some(prepared.injection));
            (Attempt::Applied, due)
        }
        Err(e) => (e.into(), due),
    }
}

/// What is checked before a set is synced (and before a dry run tries it): the install
/// namespace does not move, and no CRD changes unsafely; the install namespace.
async fn before_sync(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    format: Format,
    settings: &Settings,
    objects: &[Object],
) -> Result<Option<String>, Attempt> {
    let namespace_objects = objects
        .iter()
        .filter(|o| o.key.group.is_empty() && o.key.kind == "Namespace")
        .map(|o| o.key.name.clone());
    // A registry+v1 set's install namespace: the one named, else the one it makes.
    let home = match format {
        Format::Registry => settings
            .namespace
            .clone()
            .or_else(|| namespace_objects.clone().next()),
        // A chart's or kustomization's: the one named (its objects that name none go there).
        Format::Helm | Format::Kustomize => settings.namespace.clone(),
        Format::Plain => None,
    };
    let installed = Set::of(&ctx.applier, owner).applied_namespaces().await?;
    let wanted: std::collections::BTreeSet<String> =
        namespace_objects.chain(home.clone()).collect();
    let allowed = crate::namespace_move::allowed(bd.annotations());
    if let Some(m) = crate::namespace_move::refusal(&installed, &wanted, allowed) {
        return Err(Attempt::NamespaceMove(m));
    }
    if !crate::crd_safety::opted_out(bd.annotations()) {
        match crate::crd_safety::preflight::preflight(&ctx.client, &owner.name, objects).await {
            Ok(()) => {}
            Err(PreflightError::Unsafe(m)) => return Err(Attempt::UnsafeCrdUpgrade(m)),
            Err(e) => return Err(Attempt::ApplyFailed(e.to_string())),
        }
    }
    Ok(home)
}

/// The installed set, as the drift watches see it: nothing is written when nothing moved;
/// otherwise exactly the objects that moved are applied again (nothing is pruned: the set is
/// the one installed).
#[allow(clippy::too_many_arguments)]
async fn restore(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    objects: &[Stored],
    drifted: &[Key],
    serving: &[Serving],
    injection: &Injection,
) -> Attempt {
    if drifted.is_empty() {
        return Attempt::Applied;
    }
    ctx.memory.forget_health_reads(&owner.name, Some(drifted));
    let moved_key = |k: &Key| drifted.contains(k) || drifted.contains(&ctx.applier.placed_key(k));
    // With certificates, every object is read and they are put in (what they add, Secrets
    // and Roles, may be what moved); without, only what moved is read.
    let certified;
    let moved: Vec<&Stored> = if serving.is_empty() {
        objects.iter().filter(|o| moved_key(&o.key)).collect()
    } else {
        let all = match objects
            .iter()
            .map(Stored::object)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(all) => all,
            Err(e) => return Attempt::ApplyFailed(e.to_string()),
        };
        certified = crate::certs::inject(all, serving, injection)
            .iter()
            .filter(|o| moved_key(&o.key))
            .map(Stored::of)
            .collect::<Vec<_>>();
        certified.iter().collect()
    };
    // Parsed within a share of the unpack budget, as every bundle read.
    let _share = match ctx
        .fetcher
        .parse_share(moved.iter().map(|o| o.bytes()).sum())
        .await
    {
        Ok(share) => share,
        Err(e) => return Attempt::UnpackFailed(e.to_string()),
    };
    let moved = moved
        .into_iter()
        .map(Stored::object)
        .collect::<Result<Vec<Object>, _>>();
    let moved = match moved {
        Ok(moved) => moved,
        Err(e) => return Attempt::ApplyFailed(e.to_string()),
    };
    let timer = ctx.metrics.apply_duration.start_timer();
    let applied = ctx.applier.install(owner, moved).await;
    timer.observe_duration();
    match applied {
        Ok(applied) => {
            ctx.drift.state().update(
                &owner.name,
                applied.iter().map(|a| (a.key.clone(), a.version.clone())),
            );
            // Only what the apply changed is told: a workload whose status moved was looked
            // at again (its health), not restored.
            let restored: Vec<Key> = applied
                .iter()
                .filter(|a| a.changed)
                .map(|a| a.key.clone())
                .collect();
            if !restored.is_empty() {
                let note = format!("restored {}", report::list(&restored));
                tracing::info!(bundle_deployment = %owner.name, "{note}");
                ctx.events
                    .publish(bd, EventType::Normal, "Restored", "Reconcile", note)
                    .await;
            }
            Attempt::Applied
        }
        Err(e) => e.into(),
    }
}

/// Fetches a template's content and reads it as objects of its format, of allowed kinds; with
/// the reference by digest of an image pulled, and the share of the unpack budget reading them
/// took (held while they are).
async fn read(
    ctx: &Context,
    owner: &Owner,
    rendering: &Rendering<'_>,
    source: &Wanted,
) -> Result<(registry::Rendered, Option<String>, Share), Attempt> {
    let content = ctx
        .fetcher
        .fetch(&owner.name, source)
        .await
        .map_err(|e| Attempt::UnpackFailed(e.to_string()))?;
    let input = crate::convert::Input {
        format: rendering.format,
        tree: &content.tree,
        settings: rendering.settings,
        values: rendering.values,
        release: &owner.name,
        default_namespace: &ctx.applier.default_namespace,
    };
    let share = |bytes: u64| async move {
        ctx.fetcher
            .parse_share(bytes)
            .await
            .map_err(|e| Attempt::UnpackFailed(e.to_string()))
    };
    // The files a format converts in process are parsed within a share of the unpack budget;
    // of a chart or kustomization, only what the tool printed is (one share at a time, so no
    // reconcile ever waits for a second share while holding a first).
    let (rendered, share) = if input.rendered_by_a_tool() {
        let timer = ctx.metrics.render_duration.start_timer();
        let output = crate::convert::tool_output(&ctx.renderer, &input).await;
        timer.observe_duration();
        let output = output?;
        let share = share(output.len() as u64).await?;
        let objects = crate::convert::tool_objects(&ctx.renderer, &input, &output).await?;
        (
            registry::Rendered {
                objects,
                serving: Vec::new(),
            },
            share,
        )
    } else {
        let share = share(content.tree.bytes()).await?;
        (crate::convert::converted(&input)?, share)
    };
    ctx.allowed
        .check(&rendered.objects)
        .map_err(|e| Attempt::Invalid {
            reason: reasons::KIND_NOT_ALLOWED,
            message: e.to_string(),
        })?;
    Ok((rendered, content.resolved, share))
}

/// Adds or removes our finalizer (server-side apply of our one entry).
async fn set_finalizer(client: &Client, name: &str, on: bool) -> Result<(), Error> {
    let finalizers: Vec<&str> = if on { vec![FINALIZER] } else { Vec::new() };
    let patch = json!({
        "apiVersion": "core.rukpak.io/v1alpha1",
        "kind": "BundleDeployment",
        "metadata": {"name": name, "finalizers": finalizers},
    });
    Api::<BundleDeployment>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(FINALIZER_MANAGER),
            &Patch::Apply(patch),
        )
        .await
        .map_err(|source| Error::Write {
            what: if on {
                "adding the finalizer"
            } else {
                "removing the finalizer"
            },
            source,
        })?;
    Ok(())
}
