use k8s_openapi::jiff::Timestamp;
use olm_api::conditions::find_condition;

use super::*;

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap_or_else(|e| unreachable!("{e}")))
}

fn version(n: u8) -> Installed {
    Installed {
        bundle: format!("shop-h{n}"),
    }
}

/// (status, reason) of each condition, in type order.
fn summary(v: &Verdict) -> Vec<(String, String, String)> {
    [types::UNPACKED, types::HAS_VALID_BUNDLE, types::INSTALLED]
        .iter()
        .filter_map(|t| find_condition(&v.conditions, t))
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn row(t: &str, s: &str, r: &str) -> (String, String, String) {
    (t.into(), s.into(), r.into())
}

#[test]
fn a_first_install_waits_for_its_content_then_installs() {
    let wanted = version(1);
    let pending = verdict(
        &[],
        None,
        &wanted,
        &Attempt::Unpacking("pulling r/b:1".into()),
        Some(1),
        &at(10),
    );
    assert_eq!(
        summary(&pending),
        [
            row("Unpacked", "Unknown", "UnpackPending"),
            row("HasValidBundle", "Unknown", "UnpackPending"),
            row("Installed", "False", "InstallPending"),
        ]
    );
    assert_eq!(pending.installed, None);

    let done = verdict(
        &pending.conditions,
        None,
        &wanted,
        &Attempt::Applied,
        Some(1),
        &at(20),
    );
    assert_eq!(
        summary(&done),
        [
            row("Unpacked", "True", "UnpackSuccessful"),
            row("HasValidBundle", "True", "UnpackSuccessful"),
            row("Installed", "True", "InstallationSucceeded"),
        ]
    );
    assert_eq!(done.installed, Some(wanted));
    let installed = find_condition(&done.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(installed.message, "installed shop-h1");
    assert_eq!(installed.last_transition_time, at(20));
    assert_eq!(installed.observed_generation, Some(1));
}

#[test]
fn a_template_change_that_cannot_be_unpacked_leaves_the_installed_version_as_it_is() {
    let installed = version(1);
    let before = verdict(&[], None, &installed, &Attempt::Applied, Some(1), &at(10));
    let after = verdict(
        &before.conditions,
        Some(&installed),
        &version(2),
        &Attempt::UnpackFailed("manifest unknown".into()),
        Some(2),
        &at(20),
    );
    assert_eq!(
        summary(&after),
        [
            row("Unpacked", "False", "UnpackFailed"),
            row("HasValidBundle", "False", "UnpackFailed"),
            row("Installed", "True", "InstallationSucceeded"),
        ]
    );
    assert_eq!(after.installed, Some(installed));
    // The untouched condition keeps its time: nothing changed for it.
    let kept = find_condition(&after.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(kept.last_transition_time, at(10));
}

#[test]
fn a_failed_upgrade_says_so_and_keeps_naming_what_still_runs() {
    let installed = version(1);
    let after = verdict(
        &[],
        Some(&installed),
        &version(3),
        &Attempt::ApplyFailed("ConfigMap shop/c: the API server said: invalid".into()),
        Some(3),
        &at(20),
    );
    let c = find_condition(&after.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "UpgradeFailed")
    );
    assert_eq!(
        c.message,
        "shop-h3 could not be installed: ConfigMap shop/c: the API server said: invalid; shop-h1 stays installed and nothing was removed"
    );
    assert_eq!(after.installed, Some(installed));
}

#[test]
fn a_first_install_that_fails_is_an_install_failure() {
    let after = verdict(
        &[],
        None,
        &version(1),
        &Attempt::ApplyFailed("no matches for kind \"Widget\"".into()),
        None,
        &at(1),
    );
    let c = find_condition(&after.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(c.reason, "InstallFailed");
    assert_eq!(after.installed, None);
    let unpack_failed = verdict(
        &[],
        None,
        &version(1),
        &Attempt::UnpackFailed("denied".into()),
        None,
        &at(1),
    );
    let c =
        find_condition(&unpack_failed.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(
        (c.reason.as_str(), c.message.as_str()),
        ("InstallFailed", "shop-h1 could not be unpacked: denied")
    );
}

#[test]
fn conflicts_and_invalid_bundles_have_their_own_reasons() {
    let conflict = verdict(
        &[],
        None,
        &version(1),
        &Attempt::Conflicts("ConfigMap shop/c already exists".into()),
        None,
        &at(1),
    );
    assert_eq!(
        summary(&conflict),
        [
            row("Unpacked", "True", "UnpackSuccessful"),
            row("HasValidBundle", "True", "UnpackSuccessful"),
            row("Installed", "False", "Conflict"),
        ]
    );
    let invalid = verdict(
        &[],
        Some(&version(1)),
        &version(2),
        &Attempt::Invalid {
            reason: reasons::BUNDLE_LOAD_FAILED,
            message: "found zero objects".into(),
        },
        None,
        &at(1),
    );
    assert_eq!(
        summary(&invalid),
        [
            row("Unpacked", "True", "UnpackSuccessful"),
            row("HasValidBundle", "False", "BundleLoadFailed"),
            row("Installed", "False", "UpgradeFailed"),
        ]
    );
}

#[test]
fn an_install_mode_the_bundle_does_not_support_is_said_on_installed_for_a_valid_bundle() {
    let refused = verdict(
        &[],
        None,
        &version(1),
        &Attempt::InstallMode("unsupported install mode: SingleNamespace …".into()),
        None,
        &at(1),
    );
    assert_eq!(
        summary(&refused),
        [
            row("Unpacked", "True", "UnpackSuccessful"),
            row("HasValidBundle", "True", "UnpackSuccessful"),
            row("Installed", "False", "UnsupportedInstallMode"),
        ]
    );
    assert_eq!(refused.installed, None);
}

#[test]
fn failing_to_restore_the_installed_version_is_a_reconcile_failure() {
    let installed = version(1);
    let after = verdict(
        &[],
        Some(&installed),
        &installed,
        &Attempt::ApplyFailed("forbidden".into()),
        None,
        &at(1),
    );
    let c = find_condition(&after.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(c.reason, "ReconcileFailed");
    assert_eq!(
        c.message,
        "shop-h1 is installed, but restoring its objects failed: forbidden"
    );
    assert_eq!(after.installed, Some(installed));
}

#[test]
fn while_an_upgrade_unpacks_the_installed_version_stays_installed() {
    let installed = version(1);
    let before = verdict(&[], None, &installed, &Attempt::Applied, None, &at(1));
    let after = verdict(
        &before.conditions,
        Some(&installed),
        &version(2),
        &Attempt::Unpacking("pulling".into()),
        None,
        &at(2),
    );
    let c = find_condition(&after.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert_eq!(
        (c.status.as_str(), c.message.as_str()),
        ("True", "installed shop-h1")
    );
    assert_eq!(after.installed, Some(installed));
}

#[test]
fn the_resolved_source_follows_what_is_installed() {
    let (old, new) = ("r/x@sha256:old", "r/x@sha256:new");
    // Installed: the content this attempt pulled.
    assert_eq!(
        resolved_after(&Attempt::Applied, Some(old), Some(new)),
        Some(new)
    );
    // ConfigMaps pull no image: nothing to record.
    assert_eq!(resolved_after(&Attempt::Applied, Some(old), None), None);
    // Anything short of an install leaves what is installed, and so its record.
    for attempt in [
        Attempt::Unpacking("pulling".into()),
        Attempt::UnpackFailed("unreachable".into()),
        Attempt::Conflicts("ConfigMap a/b".into()),
        Attempt::ApplyFailed("refused".into()),
        Attempt::Invalid {
            reason: reasons::BUNDLE_LOAD_FAILED,
            message: "no manifests".into(),
        },
    ] {
        assert_eq!(
            resolved_after(&attempt, Some(old), Some(new)),
            Some(old),
            "{attempt:?}"
        );
    }
}

#[test]
fn healthy_tells_what_the_installed_objects_say() {
    use crate::health::Health;
    use crate::object::Key;
    let i = Installed {
        bundle: "b-1".into(),
    };
    let (status, reason, message) =
        healthy(Some(&Health::Healthy { count: 2 }), Some(&i)).unwrap_or_default();
    assert_eq!((status, reason), ("True", reasons::HEALTHY));
    assert!(message.contains("its 2 workloads"), "{message}");
    let sick = Health::Unhealthy {
        key: Key::new("apps", "Deployment", Some("ns"), "web"),
        message: "ProgressDeadlineExceeded: timed out".into(),
    };
    assert_eq!(
        healthy(Some(&sick), Some(&i)),
        Some((
            "False",
            reasons::UNHEALTHY,
            "Deployment.apps ns/web: ProgressDeadlineExceeded: timed out".to_owned()
        ))
    );
    let (status, reason, _) = healthy(None, None).unwrap_or_default();
    assert_eq!(
        (status, reason),
        ("False", reasons::INSTALLATION_STATUS_FALSE)
    );
    // Not looked at (an upgrade that failed): what was said stays.
    assert_eq!(healthy(None, Some(&i)), None);
}

#[test]
fn an_unsafe_crd_upgrade_keeps_the_old_version_installed_and_says_why() {
    let unsafe_ = verdict(
        &[],
        Some(&version(1)),
        &version(2),
        &Attempt::UnsafeCrdUpgrade("CRD \"w.example.com\" cannot be upgraded safely: …".into()),
        None,
        &at(1),
    );
    assert_eq!(
        summary(&unsafe_),
        [
            row("Unpacked", "True", "UnpackSuccessful"),
            row("HasValidBundle", "True", "UnpackSuccessful"),
            row("Installed", "False", "CRDUpgradeUnsafe"),
        ]
    );
    assert_eq!(unsafe_.installed, Some(version(1)), "the old version stays");
    let c = find_condition(&unsafe_.conditions, "Installed").unwrap_or_else(|| unreachable!());
    assert!(
        c.message.contains("cannot be upgraded safely")
            && c.message
                .ends_with("stays installed and nothing was removed"),
        "{}",
        c.message
    );
}
