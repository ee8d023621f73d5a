//! One test per branch of each decision, from a fixture catalog: package `foo`, channel
//! `stable`, `foo.v1.0.0` ← `foo.v1.1.0` ← `foo.v1.2.0` (each replaces the one before).

use super::*;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::operator::{OperatorSpec, OperatorStatus, UpgradeConstraintPolicy};
use olm_resolver::resolve::{CatalogContent, CatalogMeta, resolve_each};

use crate::inputs::request_of;

const FBC: &str = r#"{"schema":"olm.package","name":"foo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.0.0"},{"name":"foo.v1.1.0","replaces":"foo.v1.0.0"},{"name":"foo.v1.2.0","replaces":"foo.v1.1.0"}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.0.0","image":"foo:v1.0.0","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.1.0","image":"foo:v1.1.0","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.1.0"}}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.2.0","image":"foo:v1.2.0","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.2.0"}}]}
"#;

fn index() -> Index {
    let fbc = olm_resolver::fbc::load_model("all.json", FBC.as_bytes()).unwrap();
    Index::from_contents([(
        CatalogMeta {
            name: "c".into(),
            priority: 0,
            labels: BTreeMap::new(),
        },
        Arc::new(CatalogContent::from_fbc(fbc)),
    )])
}

fn op(name: &str) -> Operator {
    Operator::new(
        name,
        OperatorSpec {
            package_name: "foo".into(),
            version: None,
            channel: None,
            upgrade_constraint_policy: UpgradeConstraintPolicy::Enforce,
            catalog_selector: None,
            namespace: None,
            watch_namespace: None,
            target_namespaces: None,
            deployment_config: None,
            values: None,
            values_from: None,
        },
    )
}

/// An Operator whose status says it resolved to `image`.
fn reporting(name: &str, image: &str) -> Operator {
    let mut o = op(name);
    o.status = Some(OperatorStatus {
        resolved_bundle_resource: Some(image.into()),
        conditions: vec![olm_api::conditions::condition(
            crate::status::types::RESOLVED,
            true,
            "Success",
            "resolved",
            None,
            Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )],
        ..Default::default()
    });
    o
}

fn deployed(image: &str) -> Deployed {
    Deployed {
        package: None,
        bundle: None,
        version: None,
        image: Some(image.into()),
    }
}

fn base(image: &str) -> Base {
    Base::Deploys {
        bundle: None,
        image: Some(image.into()),
    }
}

/// The fresh outcome of `op` deploying `from` (if anything).
fn solve(index: &Index, op: &Operator, from: Option<&str>) -> Outcome {
    let request = request_of(op);
    let installed = installed(index, &[(&request, from.map(deployed))]);
    resolve_each(index, &[request], &installed).remove(0)
}

fn image(outcome: &Outcome) -> &str {
    &outcome.as_ref().unwrap().image
}

#[test]
fn an_operator_waits_only_when_a_catalog_it_may_use_is_unreachable() {
    let not_serving = ("new".to_owned(), LeftOut::NotServing("unpacking".into()));
    let invalid = ("bad".to_owned(), LeftOut::Invalid("not json".into()));
    assert_eq!(waiting(&[not_serving.clone(), invalid.clone()]), None);
    let down = ("down".to_owned(), LeftOut::Unreachable("refused".into()));
    let why = waiting(&[not_serving, down, invalid]).unwrap();
    assert!(why.contains(r#"catalog "down": refused"#), "{why}");
    assert!(!why.contains("bad"), "{why}");
}

#[test]
fn outcomes_read_as_answers() {
    let index = index();
    let resolved = solve(&index, &op("a"), None);
    assert!(
        matches!(answer(resolved, Duration::from_secs(1)), Answer::Resolved(r) if r.image == "foo:v1.2.0")
    );
    let timed_out = answer(
        Err(ResolveError::TimedOut(vec!["gave up.".into()])),
        Duration::from_secs(3),
    );
    assert!(
        matches!(&timed_out, Answer::Unknown(m) if m.contains("--resolution-timeout-seconds: 3s"))
    );
    let invalid = answer(
        Err(ResolveError::InvalidRequest(vec!["bad range.".into()])),
        Duration::from_secs(1),
    );
    assert!(matches!(
        invalid,
        Answer::Failed {
            invalid_spec: true,
            ..
        }
    ));
    let unsatisfiable = answer(
        Err(ResolveError::Unsatisfiable(vec!["no bundle.".into()])),
        Duration::from_secs(1),
    );
    assert!(
        matches!(unsatisfiable, Answer::Failed { invalid_spec: false, message } if message == "no bundle.")
    );
}

#[test]
fn group_answers_come_from_the_memo_first_then_the_latest_then_a_solve() {
    let now = Instant::now();
    let grace = Duration::from_secs(2);
    let answers = Arc::new(GroupAnswers::new(
        vec![("a".into(), solve(&index(), &op("a"), Some("foo:v1.0.0")))],
        vec![base("foo:v1.0.0")],
    ));
    let latest = |stale_since| Latest {
        answers: answers.clone(),
        stale_since,
    };
    let bases = [base("foo:v1.0.0")];
    assert!(matches!(
        step(
            Some(answers.clone()),
            Some(latest(None)),
            &bases,
            now,
            grace
        ),
        Step::Memoized(_)
    ));
    assert!(matches!(
        step(None, Some(latest(None)), &bases, now, grace),
        Step::Reuse { confirm_later: false, since, .. } if since == now
    ));
    assert!(matches!(
        step(None, Some(latest(None)), &[base("foo:v0.9.0")], now, grace),
        Step::Solve
    ));
    assert!(matches!(step(None, None, &bases, now, grace), Step::Solve));
    let earlier = now - Duration::from_secs(1);
    assert!(matches!(
        step(None, Some(latest(Some(earlier))), &[base("foo:v1.1.0")], now, grace),
        Step::Reuse { confirm_later: false, since, .. } if since == earlier
    ));
}

#[test]
fn an_upgrade_takes_one_edge_at_a_time() {
    let index = index();
    let a = op("a");
    // Deploying 1.0.0: the next edge, 1.1.0, not the head.
    let first = solve(&index, &a, Some("foo:v1.0.0"));
    assert_eq!(image(&first), "foo:v1.1.0");
    let answers = Arc::new(GroupAnswers::new(
        vec![("a".into(), first)],
        vec![base("foo:v1.0.0")],
    ));
    // The BundleDeployment moved to that answer: it is reused (not re-solved from 1.1.0 at
    // once), and the grace starts.
    let now = Instant::now();
    let grace = Duration::from_secs(2);
    let moved = [base("foo:v1.1.0")];
    let latest = Latest {
        answers: answers.clone(),
        stale_since: None,
    };
    match step(None, Some(latest), &moved, now, grace) {
        Step::Reuse {
            answers,
            confirm_later: true,
            ..
        } => assert_eq!(image(&answers.outcomes[0].1), "foo:v1.1.0"),
        other => panic!("{other:?}"),
    }
    // After the grace: one fresh solve, from 1.1.0, takes the next edge.
    let stale = Latest {
        answers,
        stale_since: Some(now),
    };
    assert!(matches!(
        step(None, Some(stale), &moved, now + grace, grace),
        Step::Solve
    ));
    assert_eq!(image(&solve(&index, &a, Some("foo:v1.1.0"))), "foo:v1.2.0");
}

#[test]
fn installed_bundles_come_from_labels_or_images_once_per_package() {
    let index = index();
    let (a, b) = (request_of(&op("a")), request_of(&op("b")));
    let labelled = Deployed {
        package: Some("foo".into()),
        bundle: Some("foo.v1.1.0".into()),
        version: Some("1.1.0".into()),
        image: Some("elsewhere:1".into()),
    };
    let got = installed(
        &index,
        &[(&a, Some(labelled)), (&b, Some(deployed("foo:v1.0.0")))],
    );
    assert_eq!(got.len(), 1, "one per package: {got:?}");
    assert_eq!(got[0].bundle, "foo.v1.1.0");
    let by_image = installed(&index, &[(&a, None), (&b, Some(deployed("foo:v1.0.0")))]);
    assert_eq!(by_image[0].bundle, "foo.v1.0.0");
    assert_eq!(by_image[0].version.as_deref(), Some("1.0.0"));
    assert!(installed(&index, &[(&a, Some(deployed("unknown:1")))]).is_empty());
}

#[test]
fn a_resolved_bundle_is_via_an_edge_only_from_its_predecessor() {
    let index = index();
    let a = op("a");
    let next = solve(&index, &a, Some("foo:v1.0.0"));
    let next = next.as_ref().unwrap();
    assert!(explain(&index, &a, Some(&deployed("foo:v1.0.0")), next).via_edge);
    assert!(!explain(&index, &a, None, next).via_edge);
    assert!(!explain(&index, &a, Some(&deployed("foo:v1.1.0")), next).via_edge);
}

#[test]
fn mates_are_requeued_only_when_their_status_disagrees() {
    let index = index();
    let outcome = |who: &str| (who.to_owned(), solve(&index, &op(who), None));
    let (me, agrees, stale, failed) = (
        outcome("me"),
        outcome("agrees"),
        outcome("stale"),
        (
            "failed".to_owned(),
            Err(ResolveError::Unsatisfiable(vec!["no.".into()])),
        ),
    );
    let (o_me, o_agrees, o_stale, o_failed) = (
        op("me"),
        reporting("agrees", "foo:v1.2.0"),
        reporting("stale", "foo:v1.1.0"),
        reporting("failed", "foo:v1.2.0"),
    );
    let members = [
        (&o_me, &me),
        (&o_agrees, &agrees),
        (&o_stale, &stale),
        (&o_failed, &failed),
    ];
    assert_eq!(to_requeue("me", &members), ["stale", "failed"]);
}
