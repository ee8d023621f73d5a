//! Setting `metav1.Condition`s the way Go's `meta.SetStatusCondition` does, which OLM clients
//! rely on: `lastTransitionTime` moves only when `status` changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The longest condition message the API server accepts (upstream's metav1.Condition bound,
/// which our CRDs carry): longer messages are clipped by [`clip_message`].
pub const MAX_MESSAGE_LENGTH: usize = 32768;

/// `message` cut to at most [`MAX_MESSAGE_LENGTH`] characters (the API server counts
/// characters), at a character boundary, saying how much was cut. Messages quote what remotes
/// say (registry errors, a generator's log, a pack's complaints), and a status write with a
/// longer one would fail, losing the status.
pub fn clip_message(message: String) -> String {
    clip_to(message, MAX_MESSAGE_LENGTH)
}

/// `text` cut to at most `max` characters, ending with a note of how many were cut.
pub fn clip_to(text: String, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let note = |cut: usize| format!("… ({cut} more characters)");
    // The note's own length depends on the number it shows; the longest it can be is with
    // `count` itself.
    let room = note(count).chars().count();
    if room >= max {
        // No room for a note: the first characters alone.
        return text.chars().take(max).collect();
    }
    let keep = max - room;
    let mut clipped: String = text.chars().take(keep).collect();
    clipped.push_str(&note(count - keep));
    clipped
}

/// Sets `new` in `conditions`, keyed by its type.
///
/// * A type not yet present is appended.
/// * A change of `status` replaces the condition, with `new.last_transition_time`.
/// * Otherwise reason, message and observedGeneration are updated and the old
///   `lastTransitionTime` is kept.
///
/// Returns whether anything changed, so callers can skip a write.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    new.message = clip_message(new.message);
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(new);
            true
        }
        Some(old) if old.status != new.status => {
            *old = new;
            true
        }
        Some(old) => {
            let changed = old.reason != new.reason
                || old.message != new.message
                || old.observed_generation != new.observed_generation;
            old.reason = new.reason;
            old.message = new.message;
            old.observed_generation = new.observed_generation;
            changed
        }
    }
}

/// Removes the condition of type `type_`; returns whether one was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// A condition with the given fields, stamped `now`.
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: clip_message(message.into()),
        observed_generation,
        last_transition_time: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn long_messages_are_clipped_to_what_the_api_server_accepts() {
        let short = "a".repeat(MAX_MESSAGE_LENGTH);
        assert_eq!(clip_message(short.clone()), short);
        // Multi-byte characters: the API server counts characters, and a cut never splits one.
        let long = "é".repeat(MAX_MESSAGE_LENGTH * 3);
        let clipped = clip_message(long);
        assert_eq!(clipped.chars().count(), MAX_MESSAGE_LENGTH);
        assert!(
            clipped.ends_with("more characters)"),
            "{}",
            &clipped[clipped.len() - 40..]
        );
        let mut c = vec![];
        set_condition(
            &mut c,
            Condition {
                message: "x".repeat(1 << 20),
                ..condition("Ready", false, "Broken", "", None, at(1))
            },
        );
        assert!(c[0].message.chars().count() <= MAX_MESSAGE_LENGTH);
        assert_eq!(clip_to("abcdef".into(), 3).chars().count(), 3);
    }

    #[test]
    fn a_new_type_is_appended() {
        let mut c = vec![];
        assert!(set_condition(
            &mut c,
            condition("Ready", true, "Ok", "", Some(1), at(10))
        ));
        assert_eq!(c.len(), 1);
        assert!(is_true(&c, "Ready"));
    }

    #[test]
    fn same_status_keeps_the_transition_time_and_updates_the_rest() {
        let mut c = vec![condition("Ready", true, "Ok", "first", Some(1), at(10))];
        assert!(set_condition(
            &mut c,
            condition("Ready", true, "Fine", "second", Some(2), at(20))
        ));
        assert_eq!(c[0].last_transition_time, at(10));
        assert_eq!(c[0].reason, "Fine");
        assert_eq!(c[0].message, "second");
        assert_eq!(c[0].observed_generation, Some(2));
    }

    #[test]
    fn an_identical_condition_changes_nothing() {
        let mut c = vec![condition("Ready", true, "Ok", "m", Some(1), at(10))];
        assert!(!set_condition(
            &mut c,
            condition("Ready", true, "Ok", "m", Some(1), at(20))
        ));
        assert_eq!(c[0].last_transition_time, at(10));
    }

    #[test]
    fn a_status_change_moves_the_transition_time() {
        let mut c = vec![condition("Ready", true, "Ok", "", Some(1), at(10))];
        assert!(set_condition(
            &mut c,
            condition("Ready", false, "Broken", "x", Some(1), at(20))
        ));
        assert_eq!(c[0].last_transition_time, at(20));
        assert_eq!(c[0].status, "False");
    }

    #[test]
    fn other_types_are_left_alone() {
        let mut c = vec![
            condition("A", true, "Ok", "", None, at(1)),
            condition("B", false, "No", "", None, at(2)),
        ];
        set_condition(&mut c, condition("B", true, "Yes", "", None, at(3)));
        assert_eq!(c[0], condition("A", true, "Ok", "", None, at(1)));
        assert!(remove_condition(&mut c, "A"));
        assert!(!remove_condition(&mut c, "A"));
        assert_eq!(c.len(), 1);
    }
}
