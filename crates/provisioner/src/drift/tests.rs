use super::*;

fn key(kind: &str, name: &str) -> Key {
    Key::new("", kind, Some("ns"), name)
}

fn seen(owner: &str, version: &str) -> Seen {
    Seen {
        owner: owner.to_owned(),
        version: version.to_owned(),
    }
}

fn cm() -> GroupKind {
    (String::new(), "ConfigMap".to_owned())
}

fn everywhere() -> Part {
    Part {
        namespace: None,
        of: 1,
    }
}

/// A state where `bd` applied ConfigMap `a` at version 1, and its watch listed it as such.
fn listed() -> State {
    let mut state = State::default();
    state.remember("bd", [(key("ConfigMap", "a"), "1".to_owned())]);
    let affected = state.relisted(
        cm(),
        everywhere(),
        [(key("ConfigMap", "a"), seen("bd", "1"))],
    );
    assert!(affected.is_empty());
    state
}

#[test]
fn nothing_remembered_cannot_be_told() {
    assert_eq!(State::default().drifted("bd"), None);
}

#[test]
fn a_watch_that_has_not_listed_cannot_tell() {
    let mut state = State::default();
    state.remember("bd", [(key("ConfigMap", "a"), "1".to_owned())]);
    assert_eq!(state.drifted("bd"), None);
}

#[test]
fn an_object_as_we_left_it_has_not_drifted() {
    assert_eq!(listed().drifted("bd"), Some(vec![]));
}

#[test]
fn a_changed_object_requeues_its_owner_and_has_drifted() {
    let mut state = listed();
    assert_eq!(
        state.seen(key("ConfigMap", "a"), seen("bd", "2")),
        Some("bd".into())
    );
    assert_eq!(state.drifted("bd"), Some(vec![key("ConfigMap", "a")]));
    // Restored: applied again at the version the watch then sees.
    state.update("bd", [(key("ConfigMap", "a"), "3".to_owned())]);
    assert_eq!(state.seen(key("ConfigMap", "a"), seen("bd", "3")), None);
    assert_eq!(state.drifted("bd"), Some(vec![]));
}

#[test]
fn our_own_apply_seen_again_requeues_nothing() {
    let mut state = listed();
    assert_eq!(state.seen(key("ConfigMap", "a"), seen("bd", "1")), None);
}

#[test]
fn a_deleted_object_requeues_its_owner_and_has_drifted() {
    let mut state = listed();
    assert_eq!(state.gone(&key("ConfigMap", "a")), Some("bd".into()));
    assert_eq!(state.drifted("bd"), Some(vec![key("ConfigMap", "a")]));
}

#[test]
fn an_object_relabelled_to_another_owner_has_drifted() {
    let mut state = listed();
    assert_eq!(
        state.seen(key("ConfigMap", "a"), seen("other", "1")),
        Some("bd".into())
    );
    assert_eq!(state.drifted("bd"), Some(vec![key("ConfigMap", "a")]));
}

#[test]
fn objects_not_ours_requeue_nothing() {
    let mut state = listed();
    assert_eq!(state.seen(key("ConfigMap", "b"), seen("x", "9")), None);
    assert_eq!(state.gone(&key("ConfigMap", "b")), None);
}

#[test]
fn a_relist_names_the_owners_of_what_changed_or_went_while_unwatched() {
    let mut state = listed();
    state.remember(
        "bd",
        [
            (key("ConfigMap", "a"), "1".to_owned()),
            (key("ConfigMap", "b"), "5".to_owned()),
        ],
    );
    state.remember("other", [(key("ConfigMap", "c"), "7".to_owned())]);
    // b went while the watch was away; c is as it was.
    let affected = state.relisted(
        cm(),
        everywhere(),
        [
            (key("ConfigMap", "a"), seen("bd", "1")),
            (key("ConfigMap", "c"), seen("other", "7")),
        ],
    );
    assert_eq!(affected, BTreeSet::from(["bd".to_owned()]));
    assert_eq!(state.drifted("other"), Some(vec![]));
}

#[test]
fn forgetting_a_bundle_deployment_drops_its_record() {
    let mut state = listed();
    state.forget("bd");
    assert_eq!(state.drifted("bd"), None);
    assert_eq!(state.gone(&key("ConfigMap", "a")), None);
    assert_eq!(state.sizes(), (0, 0));
}

#[test]
fn a_watch_in_parts_tells_drift_once_every_part_listed_and_a_part_replaces_only_its_own() {
    let mut state = State::default();
    let (a, b) = (
        Key::new("", "ConfigMap", Some("one"), "a"),
        Key::new("", "ConfigMap", Some("two"), "b"),
    );
    state.remember(
        "bd",
        [(a.clone(), "1".to_owned()), (b.clone(), "1".to_owned())],
    );
    let part = |ns: &str| Part {
        namespace: Some(ns.to_owned()),
        of: 2,
    };
    state.relisted(cm(), part("one"), [(a.clone(), seen("bd", "1"))]);
    assert_eq!(state.drifted("bd"), None, "namespace two has not listed");
    state.relisted(cm(), part("two"), [(b.clone(), seen("bd", "1"))]);
    assert_eq!(state.drifted("bd"), Some(vec![]));
    // Namespace one lists again without a: b, in two, is still seen.
    let affected = state.relisted(cm(), part("one"), []);
    assert_eq!(affected, BTreeSet::from(["bd".to_owned()]));
    assert_eq!(state.drifted("bd"), Some(vec![a]));
}

#[test]
fn the_group_kinds_in_use_are_those_some_set_holds_and_an_unwatched_one_must_list_again() {
    let mut state = listed();
    assert_eq!(state.group_kinds(), BTreeSet::from([cm()]));
    state.unwatched(&cm());
    assert_eq!(state.drifted("bd"), None);
    state.forget("bd");
    assert!(state.group_kinds().is_empty());
}
