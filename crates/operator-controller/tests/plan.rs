//! What operator-controller writes for one Operator, decided without a cluster: a
//! BundleDeployment only when it must change, never one removed or downgraded for want of an
//! answer, one status write per change, and events that say what changed and why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use olm_api::bundle_deployment::{BundleDeployment, BundleDeploymentStatus};
use olm_api::conditions::find_condition;
use olm_api::operator::{Operator, OperatorSpec, UpgradeConstraintPolicy};
use olm_resolver::resolve::{Deprecated, Notice, Resolved};
use operator_controller::inputs::deployed;
use operator_controller::plan::{Plan, plan};
use operator_controller::resolution::{Answer, Decision, LeftOut};

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_000).unwrap())
}

fn operator(generation: i64) -> Operator {
    let mut op = Operator::new(
        "op",
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
    );
    op.metadata.uid = Some("uid-op".into());
    op.metadata.generation = Some(generation);
    op
}

fn bundle(version: &str) -> Resolved {
    Resolved {
        request: 0,
        entry: 0,
        package: "foo".into(),
        name: format!("foo.v{version}"),
        version: version.into(),
        image: format!("example.com/foo:v{version}"),
        catalog: "c".into(),
        deprecated: false,
        mediatype: None,
    }
}

fn decision(answer: Answer, existing: Option<&BundleDeployment>) -> Decision {
    Decision {
        answer,
        left_out: Vec::new(),
        notices: Vec::new(),
        deployed: existing.map(deployed),
        via_edge: false,
        catalog_hash: Some("abcdef0123456789".into()),
    }
}

/// Plans, then applies the plan to the Operator and BundleDeployment as the API would.
fn step(op: &mut Operator, bd: &mut Option<BundleDeployment>, answer: Answer) -> Plan {
    let d = decision(answer, bd.as_ref());
    let p = plan(op, bd.as_ref(), &d, &now());
    if let Some(want) = &p.apply {
        *bd = Some(want.clone());
    }
    op.status = Some(p.status.clone());
    p
}

fn cond(p: &Plan, type_: &str) -> (String, String) {
    let c = find_condition(&p.status.conditions, type_).unwrap();
    (c.status.clone(), c.reason.clone())
}

#[test]
fn a_resolution_writes_once_and_an_unchanged_one_writes_nothing() {
    let (mut op, mut bd) = (operator(1), None);
    let first = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert!(first.apply.is_some() && first.status_changed);
    assert_eq!(cond(&first, "Resolved"), ("True".into(), "Success".into()));
    assert_eq!(
        cond(&first, "Installed"),
        ("Unknown".into(), "InstallationStatusUnknown".into())
    );
    assert_eq!(
        cond(&first, "Deprecated"),
        ("False".into(), "NotDeprecated".into())
    );
    assert_eq!(first.events.len(), 1);
    assert!(
        first.events[0].note.starts_with("Resolved to foo.v1.0.0"),
        "{:?}",
        first.events
    );
    let again = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert!(again.apply.is_none() && !again.status_changed && again.events.is_empty());
}

#[test]
fn a_new_bundle_moves_the_bundle_deployment_and_says_from_what_to_what_and_why() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    let moved = step(&mut op, &mut bd, Answer::Resolved(bundle("1.1.0")));
    assert_eq!(
        moved.events[0].note,
        "Resolved bundle changed from foo.v1.0.0 to foo.v1.1.0: catalog \"c\" (content abcdef012345) offers it."
    );
    // A spec change is named as the reason.
    op.metadata.generation = Some(2);
    let spec = step(&mut op, &mut bd, Answer::Resolved(bundle("2.0.0")));
    assert!(
        spec.events[0]
            .note
            .ends_with("the Operator's spec changed (generation 2)."),
        "{:?}",
        spec.events
    );
}

#[test]
fn a_failure_keeps_the_bundle_deployment_and_clears_only_the_resolved_fields() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    let failed = step(
        &mut op,
        &mut bd,
        Answer::Failed {
            invalid_spec: false,
            message: "Request \"op\" cannot be satisfied.".into(),
        },
    );
    assert!(
        failed.apply.is_none(),
        "the BundleDeployment is never removed or changed"
    );
    assert_eq!(
        bd.as_ref().and_then(|b| deployed(b).version),
        Some("1.0.0".into())
    );
    assert_eq!(
        cond(&failed, "Resolved"),
        ("False".into(), "ResolutionFailed".into())
    );
    assert!(
        find_condition(&failed.status.conditions, "Resolved")
            .unwrap()
            .message
            .ends_with("The existing BundleDeployment is kept.")
    );
    assert_eq!(failed.status.resolved_version, None);
    assert_eq!(
        cond(&failed, "Deprecated"),
        ("Unknown".into(), "NotResolved".into())
    );
    assert!(
        failed
            .events
            .iter()
            .any(|e| e.warning && e.reason == "ResolutionFailed")
    );
    assert!(!failed.retry);
    // The same failure again: no write, no second event.
    let same = step(
        &mut op,
        &mut bd,
        Answer::Failed {
            invalid_spec: false,
            message: "Request \"op\" cannot be satisfied.".into(),
        },
    );
    assert!(!same.status_changed && same.events.is_empty());
    let invalid = step(
        &mut op,
        &mut bd,
        Answer::Failed {
            invalid_spec: true,
            message: "bad range".into(),
        },
    );
    assert_eq!(
        cond(&invalid, "Resolved"),
        ("False".into(), "InvalidSpec".into())
    );
}

#[test]
fn unknown_keeps_what_was_resolved_and_retries() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    let unknown = step(
        &mut op,
        &mut bd,
        Answer::Unknown("catalogd could not be reached".into()),
    );
    assert!(unknown.retry && unknown.apply.is_none());
    assert_eq!(
        cond(&unknown, "Resolved"),
        ("Unknown".into(), "ResolutionUnknown".into())
    );
    assert_eq!(unknown.status.resolved_version.as_deref(), Some("1.0.0"));
    assert!(
        unknown
            .events
            .iter()
            .any(|e| e.reason == "ResolutionUnknown")
    );
}

#[test]
fn deprecations_name_the_widest_notice_and_carry_every_message() {
    let (op, bd) = (operator(1), None::<BundleDeployment>);
    let mut d = decision(Answer::Resolved(bundle("1.0.0")), None);
    d.notices = vec![
        Notice {
            what: Deprecated::Bundle,
            message: "1.0.0 has a CVE".into(),
        },
        Notice {
            what: Deprecated::Channel,
            message: "use stable".into(),
        },
    ];
    let p = plan(&op, bd.as_ref(), &d, &now());
    let c = find_condition(&p.status.conditions, "Deprecated").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "ChannelDeprecated")
    );
    assert_eq!(c.message, "1.0.0 has a CVE; use stable");
}

#[test]
fn left_out_catalogs_are_named_and_a_foreign_bundle_deployment_is_not_taken_over() {
    let op = operator(1);
    let mut foreign =
        operator_controller::bundle_deployment::desired(&op, &bundle("1.0.0")).unwrap();
    foreign.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Thing".into(),
        name: "other".into(),
        uid: "uid-other".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let mut d = decision(Answer::Resolved(bundle("1.1.0")), Some(&foreign));
    d.left_out = vec![("broken".into(), LeftOut::Invalid("not JSON".into()))];
    let p = plan(&op, Some(&foreign), &d, &now());
    assert!(p.apply.is_none());
    let installed = find_condition(&p.status.conditions, "Installed").unwrap();
    assert_eq!(installed.reason, "InstallationFailed");
    assert!(installed.message.contains("controlled by another object"));
    let resolved = find_condition(&p.status.conditions, "Resolved").unwrap();
    assert!(
        resolved
            .message
            .contains("\"broken\" has invalid content (not JSON)"),
        "{}",
        resolved.message
    );
}

/// The provisioner's report on `bd`: generation 1 observed, with these conditions.
fn report(bd: &mut BundleDeployment, conditions: &[(&str, &str, &str, &str)]) {
    bd.metadata.generation = Some(1);
    bd.status = Some(BundleDeploymentStatus {
        observed_generation: Some(1),
        conditions: conditions
            .iter()
            .map(|(type_, status, reason, message)| Condition {
                type_: (*type_).into(),
                status: (*status).into(),
                reason: (*reason).into(),
                message: (*message).into(),
                observed_generation: Some(1),
                last_transition_time: now(),
            })
            .collect(),
        ..Default::default()
    });
}

fn message(p: &Plan, type_: &str) -> String {
    find_condition(&p.status.conditions, type_)
        .unwrap()
        .message
        .clone()
}

#[test]
fn health_is_unknown_until_the_provisioner_reports_and_false_when_nothing_can_be_installed() {
    let (mut op, mut bd) = (operator(1), None);
    let first = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert_eq!(
        cond(&first, "Healthy"),
        ("Unknown".into(), "HealthStatusUnknown".into())
    );
    let (op, none) = (operator(1), None::<BundleDeployment>);
    let failed = Answer::Failed {
        invalid_spec: false,
        message: "no bundle".into(),
    };
    let p = plan(&op, none.as_ref(), &decision(failed, None), &now());
    assert_eq!(cond(&p, "Healthy"), ("False".into(), "NotInstalled".into()));
}

#[test]
fn an_unhealthy_bundle_deployment_is_shown_word_for_word_with_one_warning_per_new_message() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    let stuck = "Deployment foo-system/foo: ProgressDeadlineExceeded: ReplicaSet \"foo-1\" has timed out progressing.";
    let b = bd.as_mut().unwrap();
    report(
        b,
        &[
            ("Installed", "True", "InstallationSucceeded", "installed"),
            ("Healthy", "False", "Unhealthy", stuck),
        ],
    );
    let p = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert_eq!(cond(&p, "Healthy"), ("False".into(), "Unhealthy".into()));
    assert_eq!(message(&p, "Healthy"), stuck);
    assert_eq!(
        cond(&p, "Installed").0,
        "True",
        "installed, yet not healthy"
    );
    let warnings: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.reason == "Unhealthy")
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0].warning && warnings[0].note == stuck,
        "{:?}",
        p.events
    );
    let same = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert!(!same.status_changed && same.events.is_empty());
}

#[test]
fn becoming_healthy_is_one_normal_event_and_a_stale_report_is_unknown() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    report(
        bd.as_mut().unwrap(),
        &[
            ("Installed", "True", "InstallationSucceeded", "installed"),
            ("Healthy", "True", "Healthy", "foo.v1.0.0 is healthy"),
        ],
    );
    let p = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert_eq!(cond(&p, "Healthy"), ("True".into(), "Healthy".into()));
    assert!(
        p.events
            .iter()
            .any(|e| !e.warning && e.reason == "Healthy" && e.note == "foo.v1.0.0 is healthy"),
        "{:?}",
        p.events
    );
    // An upgrade: the old report describes the old bundle, so health is unknown until the
    // provisioner has observed the new generation.
    let up = step(&mut op, &mut bd, Answer::Resolved(bundle("1.1.0")));
    assert_eq!(
        cond(&up, "Healthy"),
        ("Unknown".into(), "HealthStatusUnknown".into())
    );
    assert!(message(&up, "Healthy").contains("observe generation 2"));
}

#[test]
fn a_bundle_deployment_with_nothing_installed_is_not_installed_not_unhealthy() {
    let (mut op, mut bd) = (operator(1), None);
    step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    report(
        bd.as_mut().unwrap(),
        &[
            ("Installed", "False", "InstallFailed", "pull failed"),
            (
                "Healthy",
                "False",
                "InstallationStatusFalse",
                "nothing is installed (see Installed)",
            ),
        ],
    );
    let p = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    assert_eq!(cond(&p, "Healthy"), ("False".into(), "NotInstalled".into()));
    assert!(p.events.iter().all(|e| e.reason != "Unhealthy"));
}

#[test]
fn a_bundle_deployment_that_cannot_be_written_is_not_installed_and_says_why() {
    let (mut op, mut bd) = (operator(1), None);
    let planned = step(&mut op, &mut bd, Answer::Resolved(bundle("1.0.0")));
    let mut installed = planned.status.clone();
    installed.installed_version = Some("0.9.0".into());
    let (status, event) = operator_controller::plan::bundle_deployment_not_written(
        &op,
        &installed,
        "writing the BundleDeployment failed: forbidden".into(),
        &now(),
    );
    let c = find_condition(&status.conditions, "Installed").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InstallationFailed")
    );
    assert!(c.message.contains("forbidden"), "{}", c.message);
    assert_eq!(status.installed_version, None);
    assert_eq!(status.installed_bundle_resource, None);
    // The rest is as planned.
    assert_eq!(
        find_condition(&status.conditions, "Resolved"),
        find_condition(&planned.status.conditions, "Resolved")
    );
    assert!(event.warning && event.reason == "InstallationFailed");
}
