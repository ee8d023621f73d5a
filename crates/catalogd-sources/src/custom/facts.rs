//! What the planner needs to know of a custom spec ([`Facts`]): a generator is polled at its
//! interval; nothing is pinned, and nothing is conditional (a new spec always runs its
//! generator; a poll of the current one may find the same output, and then nothing is
//! unpacked again).

use olm_api::catalog::{CustomSource as CustomSpec, ResolvedSource};

use crate::contract::Facts;
use crate::poll::poll_interval;

/// The facts of `spec`, given what was fetched for the served content.
pub fn facts<'a>(spec: &CustomSpec, previous: Option<&'a ResolvedSource>) -> Facts<'a> {
    Facts {
        interval: poll_interval(spec.poll_interval.as_deref()),
        pinned_and_served: false,
        conditional: false,
        last_poll: previous
            .and_then(|p| p.custom.as_ref())
            .and_then(|c| c.last_poll_attempt.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generator_is_only_ever_polled() {
        let spec = CustomSpec {
            poll_interval: Some("1h".into()),
            ..Default::default()
        };
        let served = ResolvedSource::default();
        let f = facts(&spec, Some(&served));
        assert!(f.interval.is_some());
        assert!(!f.pinned_and_served && !f.conditional);
        assert_eq!(f.last_poll, None);
    }
}
