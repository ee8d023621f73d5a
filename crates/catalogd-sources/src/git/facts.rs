//! What the planner needs to know of a git spec ([`Facts`]): a commit never names other
//! content, so a pinned commit is never polled, and one already served under the same spec
//! needs no request. Nothing is conditional: another directory or ref of the same commit is
//! other content, so a new spec is fetched in full (the current one is polled by `ls-refs`).

use olm_api::catalog::{GitSource as GitSpec, ResolvedSource};

use super::spec::redact;
use crate::contract::Facts;
use crate::poll::poll_interval;

/// The facts of `spec`, given what was fetched for the served content and whether that
/// content is the current spec's (`current`).
pub fn facts<'a>(spec: &GitSpec, previous: Option<&'a ResolvedSource>, current: bool) -> Facts<'a> {
    // Recorded without its user info, and compared that way.
    let previous = previous
        .and_then(|p| p.git.as_ref())
        .filter(|g| g.repository == redact(&spec.repository));
    let pinned = spec.r#ref.commit.as_ref();
    Facts {
        interval: poll_interval(spec.poll_interval.as_deref()).filter(|_| pinned.is_none()),
        pinned_and_served: current
            && pinned
                .zip(previous)
                .is_some_and(|(pin, p)| *pin == p.commit),
        conditional: false,
        last_poll: previous.and_then(|g| g.last_poll_attempt.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::catalog::{GitRef, ResolvedGitSource};

    fn spec(commit: Option<&str>) -> GitSpec {
        GitSpec {
            repository: "https://token@git.example/c.git".into(),
            r#ref: GitRef {
                commit: commit.map(str::to_owned),
                ..Default::default()
            },
            poll_interval: Some("1h".into()),
            ..Default::default()
        }
    }

    fn served(commit: &str) -> &'static ResolvedSource {
        // Leaked: the facts borrow it for the rest of the test.
        Box::leak(Box::new(ResolvedSource {
            git: Some(ResolvedGitSource {
                repository: "https://git.example/c.git".into(),
                commit: commit.into(),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    #[test]
    fn a_commit_served_for_the_current_spec_is_pinned_and_never_polled() {
        let f = facts(&spec(Some("abc")), Some(served("abc")), true);
        assert!(f.pinned_and_served);
        assert_eq!(f.interval, None);
        // The same commit under another spec (directory, ref): fetched again.
        assert!(!facts(&spec(Some("abc")), Some(served("abc")), false).pinned_and_served);
        assert!(!facts(&spec(Some("abc")), Some(served("def")), true).pinned_and_served);
    }

    #[test]
    fn a_branch_is_polled_and_never_conditional() {
        let f = facts(&spec(None), Some(served("abc")), true);
        assert!(!f.pinned_and_served);
        assert!(!f.conditional);
        assert!(f.interval.is_some());
    }
}
