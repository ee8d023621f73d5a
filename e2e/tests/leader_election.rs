//! Leader election with two replicas of each manager, in a test binary of its own (its own
//! control plane, whose audit log it reads): only the leader reconciles; a killed leader hands
//! over and the other replica reconciles within the lease; a paused leader (SIGSTOP) that
//! resumes after losing its lease writes nothing (the API server's audit log shows no write
//! with its user agent) and exits; catalogd followers serve the leader's content.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use olm_api::catalog::Catalog;
use olm_e2e::catalogs::{
    example_catalog, metric, put_catalog_configmap, unpacked_configmap_catalog, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{
    Catalogd, Manager, OLM_NAMESPACE, Running, StopOnDrop, start_catalog_switcher_with,
    start_catalogd_with, start_operator_controller_with,
};
use olm_e2e::operators::{create_operator, one_bundle_catalog, wait_resolved};
use olm_e2e::wait::wait_for;
use serde_json::json;
use sha2::Digest as _;

/// The tests of this binary each run replicas of one manager, and catalogd's replicas and a
/// lone catalogd must not meet: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lease the tests' replicas elect on: short, so hand-overs are quick.
const LEASE_SECONDS: u64 = 4;

/// How long a hand-over may take at most: the lease running out, the library's random wait
/// (under 1 s) before taking an expired lease, and the new leader's watch of the Lease.
const HAND_OVER: Duration = Duration::from_secs(LEASE_SECONDS + 6);

fn elect(lease: &str) -> Vec<String> {
    vec![
        "--leader-elect".into(),
        format!("--leader-election-lease-name={lease}"),
        format!("--leader-election-lease-duration-seconds={LEASE_SECONDS}"),
        "--leader-election-renew-grace-seconds=2".into(),
    ]
}

/// Flags serving catalogd's content over HTTPS with a certificate for `names` from the
/// harness's CA, trusted by followers copying from the leader.
fn content_tls(ctx: &TestContext, names: &[&str]) -> Vec<String> {
    let ca = olm_e2e::tls::ca().unwrap();
    let dir = std::env::temp_dir().join(format!("olm-e2e-{}", ctx.name("content-tls")));
    let issued = ca.issue_for(&dir, names).unwrap();
    olm_e2e::process::remove_on_exit(&dir).unwrap();
    vec![
        format!("--content-tls-cert-file={}", issued.cert.display()),
        format!("--content-tls-key-file={}", issued.key.display()),
        format!("--peer-ca-file={}", ca.cert_file().display()),
    ]
}

/// A client trusting the harness's CA.
fn trusting_client() -> reqwest::Client {
    let pem = &olm_e2e::tls::ca().unwrap().pem;
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// One replica of a manager.
struct Replica {
    manager: Manager,
    admin_url: String,
    /// catalogd's content server.
    content_url: Option<String>,
    _stop: StopOnDrop,
}

impl From<Catalogd> for Replica {
    fn from(c: Catalogd) -> Self {
        Replica {
            _stop: StopOnDrop(c.manager.clone()),
            manager: c.manager,
            admin_url: c.admin_url,
            content_url: Some(c.content_url),
        }
    }
}

impl From<Running> for Replica {
    fn from(r: Running) -> Self {
        Replica {
            _stop: StopOnDrop(r.manager.clone()),
            manager: r.manager,
            admin_url: r.admin_url,
            content_url: None,
        }
    }
}

/// `leader_election_master_status{name=lease}` of `replica` (0 when unreachable).
async fn master(replica: &Replica, lease: &str) -> f64 {
    metric(
        &replica.admin_url,
        "leader_election_master_status",
        &[&format!("name=\"{lease}\"")],
    )
    .await
    .unwrap_or(0.0)
}

/// All reconciles `replica` counted, whatever their controller and result.
async fn reconciles(replica: &Replica) -> f64 {
    let text = reqwest::get(format!("{}/metrics", replica.admin_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Waits (at most `deadline`) until `replicas[0]` leads and says so, and no other does.
async fn wait_leads(replicas: &[&Replica], lease: &str, deadline: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let mut status = Vec::new();
        for r in replicas {
            status.push(master(r, lease).await);
        }
        if status[0] == 1.0 && status[1..].iter().all(|s| *s == 0.0) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < deadline,
            "replica 0 does not lead {lease} alone after {deadline:?}: {status:?}"
        );
        // Polling metrics, bounded by the deadline above.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The lease's holder identity.
async fn holder(ctx: &TestContext, lease: &str) -> String {
    Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .get(lease)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap()
}

async fn delete_lease(ctx: &TestContext, lease: &str) {
    let _ = Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .delete(lease, &DeleteParams::default())
        .await;
}

type Work<'a> = Box<dyn Fn(u32) -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

/// The life of a pair of replicas, `work(round)` making a change and waiting until it is
/// reconciled:
///
/// 1. `a` and `b` start, `a` first: `a` leads, does round 0 and counts reconciles; `b` counts
///    none (`follower` checks the rest of what a follower does).
/// 2. `a` is killed: `b` leads within the lease and does round 1.
/// 3. `c` starts and `b` is paused: `c` leads and does round 2. `b` resumes after losing its
///    lease: it exits, and the API server received no write from it since it was paused.
/// 4. `d` starts and `c` gets SIGTERM: `c` exits 0 having released the lease; `d` leads.
/// 5. The lease is taken from `d` by hand: `d` exits at once and writes nothing more.
async fn hand_over(
    ctx: &TestContext,
    lease: &str,
    start: impl Fn(&str) -> Replica,
    work: Work<'_>,
    follower: impl AsyncFn(&Replica),
) {
    delete_lease(ctx, lease).await;
    let a = start("a");
    wait_leads(&[&a], lease, HAND_OVER).await;
    let b = start("b");
    work(0).await;
    wait_leads(&[&a, &b], lease, HAND_OVER).await;
    follower(&b).await;
    assert!(reconciles(&a).await > 0.0, "the leader reconciled nothing");
    assert_eq!(reconciles(&b).await, 0.0, "the follower reconciled");

    a.manager.signal("KILL").unwrap();
    let took = wait_leads(&[&b], lease, HAND_OVER).await;
    eprintln!("{lease}: the follower leads {took:?} after the leader was killed");
    work(1).await;
    assert!(
        reconciles(&b).await > 0.0,
        "the new leader reconciled nothing"
    );

    let c = start("c");
    let identity = holder(ctx, lease).await;
    b.manager.signal("STOP").unwrap();
    // Requests b sent before it stopped reach the server within moments.
    let paused = SystemTime::now() + Duration::from_millis(500);
    let took = wait_leads(&[&c], lease, HAND_OVER).await;
    eprintln!("{lease}: the follower leads {took:?} after the leader was paused");
    work(2).await;
    b.manager.signal("CONT").unwrap();
    let status = b
        .manager
        .wait_exit(Duration::from_secs(30))
        .expect("a leader that lost its lease exits");
    assert!(!status.success(), "{status}");
    let log = std::fs::read_to_string(&b.manager.log).unwrap();
    assert!(log.contains("lost leadership"), "{log}");
    let writes = olm_e2e::audit::writes_by(&identity, paused).unwrap();
    assert!(
        writes.is_empty(),
        "the paused leader {identity} wrote after it lost its lease: {writes:#?}"
    );
    eprintln!(
        "{lease}: the resumed leader had {} writes refused by its guard before it exited",
        log.matches("refused a write").count()
    );
    assert!(c.manager.is_running());

    // A leader stopped with SIGTERM releases the lease as it exits: the next one need not wait
    // for it to run out.
    let d = start("d");
    let leader = holder(ctx, lease).await;
    c.manager.signal("TERM").unwrap();
    let terminated = Instant::now();
    let status = c.manager.wait_exit(Duration::from_secs(30)).unwrap();
    eprintln!(
        "{lease}: the leader exited {:?} after SIGTERM",
        terminated.elapsed()
    );
    assert!(status.success(), "{status}");
    let after = Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .get(lease)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_ne!(
        after.as_deref(),
        Some(leader.as_str()),
        "the lease was not released"
    );
    wait_leads(&[&d], lease, HAND_OVER).await;

    // The lease taken from under the leader (as by an admin): it stops and exits at once,
    // writing nothing more.
    let identity = holder(ctx, lease).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .patch(
            lease,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {
                "holderIdentity": "intruder",
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
                "leaseDurationSeconds": 3600,
            }})),
        )
        .await
        .unwrap();
    let taken = SystemTime::now() + Duration::from_millis(500);
    let status = d
        .manager
        .wait_exit(Duration::from_secs(10))
        .expect("a leader whose lease was taken exits");
    assert!(!status.success(), "{status}");
    let log = std::fs::read_to_string(&d.manager.log).unwrap();
    assert!(log.contains("the lease shows another holder"), "{log}");
    let writes = olm_e2e::audit::writes_by(&identity, taken).unwrap();
    assert!(
        writes.is_empty(),
        "{identity} wrote after its lease was taken: {writes:#?}"
    );
}

#[tokio::test]
async fn catalogd_replicas_elect_one_leader_and_followers_serve_its_content() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("ha-catalogd").await.unwrap();
    let lease = ctx.name("catalogd");
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    // Content over HTTPS with a certificate for the Service's name (and loopback, for the
    // test's own reads): followers reach the leader's address under that name.
    let mut args = elect(&lease);
    args.extend(content_tls(&ctx, &["catalogd.olm-e2e.test", "127.0.0.1"]));
    args.push("--external-address=https://catalogd.olm-e2e.test:8443".into());
    let start = |replica: &str| -> Replica {
        start_catalogd_with(&format!("{lease}-{replica}"), &args)
            .unwrap()
            .into()
    };
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let last = std::sync::Mutex::new(None::<String>);
    let work: Work = Box::new(|round| {
        let (ctx, api, name, cm, last) = (&ctx, &api, &name, &cm, &last);
        Box::pin(async move {
            let content = example_catalog(&format!("0.{round}.0"));
            let previous = last.lock().unwrap().clone();
            let unpacked = match previous {
                None => {
                    unpacked_configmap_catalog(ctx, name, cm, &content)
                        .await
                        .unwrap()
                        .1
                }
                Some(hash) => {
                    put_catalog_configmap(ctx, cm, &content).await.unwrap();
                    wait_unpacked(api, name, Some(&hash)).await.unwrap()
                }
            };
            *last.lock().unwrap() = unpacked.status.and_then(|s| s.content_hash);
        })
    });
    let follower = async |b: &Replica| {
        // The follower's content server answers with the leader's content.
        let hash = last.lock().unwrap().clone().unwrap();
        let url = format!(
            "{}/catalogs/{name}/all.json",
            b.content_url.as_deref().unwrap()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let http = trusting_client();
        loop {
            let response = http.get(&url).send().await.unwrap();
            let etag = response
                .headers()
                .get("etag")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if response.status() == 200 && etag.as_deref() == Some(&format!("\"{hash}\"")) {
                let body = response.bytes().await.unwrap();
                let digest = sha2::Sha256::digest(&body);
                assert_eq!(hex::encode(digest), hash);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the follower does not serve {hash}: {etag:?}"
            );
            // Polling the follower's content server, bounded by the deadline above.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    hand_over(&ctx, &lease, start, work, follower).await;
    finish(ctx, &lease).await;
}

/// Whether `replica`'s `/readyz` answers 200.
async fn ready(replica: &Replica) -> bool {
    reqwest::get(format!("{}/readyz", replica.admin_url))
        .await
        .is_ok_and(|r| r.status() == 200)
}

/// Waits (at most 30 s) until `check` holds, polling every 200 ms; `what` names it.
async fn eventually(what: &str, check: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within 30 s");
        // Polling, bounded by the deadline above.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A leader whose advertisement is gone (its write failed, or someone removed it) puts it
/// back at its next renewal; a follower that cannot copy what the leader serves (here its
/// store refuses it: a served-index budget of one byte) reports not ready once it has been
/// behind for longer than --follower-max-lag-seconds, and says how far behind it is.
#[tokio::test]
async fn a_lost_advertisement_returns_and_a_lagging_follower_is_not_ready() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("ha-lag").await.unwrap();
    let lease = ctx.name("catalogd");
    delete_lease(&ctx, &lease).await;
    let args = elect(&lease);
    let a: Replica = start_catalogd_with(&format!("{lease}-a"), &args)
        .unwrap()
        .into();
    wait_leads(&[&a], &lease, HAND_OVER).await;
    let leases = Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let address = |l: &Lease| {
        l.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("olm-rs.io/leader-address").cloned())
    };
    eventually("the leader advertises its address", async || {
        address(&leases.get(&lease).await.unwrap()).is_some()
    })
    .await;
    leases
        .patch(
            &lease,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
                "olm-rs.io/leader-address": null, "olm-rs.io/leader-identity": null}}})),
        )
        .await
        .unwrap();
    eventually("the leader advertises its address again", async || {
        address(&leases.get(&lease).await.unwrap()).is_some()
    })
    .await;

    let mut lagging = args.clone();
    lagging.extend([
        "--max-served-index-bytes=1".to_owned(),
        "--follower-max-lag-seconds=2".to_owned(),
    ]);
    let b: Replica = start_catalogd_with(&format!("{lease}-b"), &lagging)
        .unwrap()
        .into();
    eventually("the follower is ready: nothing is served yet", async || {
        ready(&b).await
    })
    .await;
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    eventually("the lagging follower reports not ready", async || {
        !ready(&b).await
    })
    .await;
    let behind = metric(&b.admin_url, "catalogd_follower_lag_seconds", &[])
        .await
        .unwrap();
    assert!(behind >= 2.0, "catalogd_follower_lag_seconds = {behind}");
    assert!(ready(&a).await, "the leader stays ready");
    drop(b);
    finish(ctx, &lease).await;
}

#[tokio::test]
async fn operator_controller_replicas_elect_one_leader() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("ha-operators").await.unwrap();
    // Content over HTTPS: the operator-controllers trust the CA they are given.
    let catalogd =
        start_catalogd_with(&ctx.name("catalogd"), &content_tls(&ctx, &["127.0.0.1"])).unwrap();
    let _catalogd = StopOnDrop(catalogd.manager.clone());
    let pkg = "ha-pkg";
    let text = one_bundle_catalog(pkg);
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let lease = ctx.name("operators");
    let mut args = elect(&lease);
    args.push(format!(
        "--catalogd-ca-file={}",
        olm_e2e::tls::ca().unwrap().cert_file().display()
    ));
    let start = |replica: &str| -> Replica {
        start_operator_controller_with(&format!("{lease}-{replica}"), &args)
            .unwrap()
            .into()
    };
    let work: Work = Box::new(|round| {
        let ctx = &ctx;
        Box::pin(async move {
            let name = ctx.name(&format!("op-{round}"));
            let api = create_operator(ctx, &name, json!({"packageName": pkg}))
                .await
                .unwrap();
            wait_resolved(&api, &name, "True", "Success").await.unwrap();
        })
    });
    hand_over(&ctx, &lease, start, work, async |_: &Replica| {}).await;
    finish(ctx, &lease).await;
}

#[tokio::test]
async fn catalog_switcher_replicas_elect_one_leader() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("ha-switcher").await.unwrap();
    let major = ctx.client.apiserver_version().await.unwrap().major;
    let lease = ctx.name("switcher");
    let args = elect(&lease);
    let start = |replica: &str| -> Replica {
        start_catalog_switcher_with(&format!("{lease}-{replica}"), &args)
            .unwrap()
            .into()
    };
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let work: Work = Box::new(|round| {
        let (ctx, api, major) = (&ctx, &api, &major);
        Box::pin(async move {
            let name = ctx.name(&format!("sw-{round}"));
            let catalog: Catalog = serde_json::from_value(ctx.labelled(json!({
                "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
                "metadata": {"name": name, "annotations": {
                    "olm.catalogImageTemplate": "registry.invalid/catalog:v{kube_major_version}"
                }},
                "spec": {"source": {"type": "image", "image": {"ref": "registry.invalid/catalog:placeholder"}}}
            })))
            .unwrap();
            api.create(&Default::default(), &catalog).await.unwrap();
            let want = format!("registry.invalid/catalog:v{major}");
            wait_for(
                api,
                &name,
                "the image reference switched",
                HAND_OVER * 3,
                move |c| {
                    c.and_then(|c| c.spec.source.image.as_ref())
                        .is_some_and(|i| i.r#ref == want)
                },
            )
            .await
            .unwrap();
        })
    });
    hand_over(&ctx, &lease, start, work, async |_: &Replica| {}).await;
    finish(ctx, &lease).await;
}

/// Cleans up while the last leader still runs (a Catalog's finalizer needs catalogd), then
/// deletes the test's Lease.
async fn finish(ctx: TestContext, lease: &str) {
    let leases = Api::<Lease>::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    ctx.cleanup().await.unwrap();
    let _ = leases.delete(lease, &DeleteParams::default()).await;
}
