//! What the planner needs to know of an image spec ([`Facts`]): a digest never names other
//! content, so a pinned image is never polled, and one already served under the same reference
//! needs no request; any served image can be checked conditionally (the registry is asked for
//! the digest first, and the same digest is the same content, whatever the reference).

use olm_api::catalog::{ImageSource as ImageSpec, ResolvedSource};

use crate::contract::Facts;
use crate::poll::poll_interval;
use olm_puller::image::reference::digest_of;

/// The facts of `spec`, given what was fetched for the served content.
pub fn facts<'a>(spec: &ImageSpec, previous: Option<&'a ResolvedSource>) -> Facts<'a> {
    let previous = previous.and_then(|p| p.image.as_ref());
    let served_digest = previous
        .and_then(|i| i.resolved_ref.as_deref())
        .and_then(digest_of);
    let pinned = digest_of(&spec.r#ref);
    let same_ref = previous.filter(|i| i.r#ref == spec.r#ref);
    Facts {
        // The CRD refuses a pollInterval with a digest, as upstream; ignored if one gets by.
        interval: poll_interval(spec.poll_interval.as_deref()).filter(|_| pinned.is_none()),
        // (Under another reference, the source confirms it without a request, and the status
        // then names the new reference.)
        pinned_and_served: pinned.is_some() && pinned == served_digest && same_ref.is_some(),
        conditional: served_digest.is_some(),
        last_poll: same_ref.and_then(|i| i.last_poll_attempt.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::catalog::ResolvedImageSource;

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn spec(r#ref: &str, poll: Option<&str>) -> ImageSpec {
        ImageSpec {
            r#ref: r#ref.into(),
            poll_interval: poll.map(str::to_owned),
            ..Default::default()
        }
    }

    fn served(r#ref: &str) -> &'static ResolvedSource {
        // Leaked: the facts borrow it for the rest of the test.
        Box::leak(Box::new(ResolvedSource {
            image: Some(ResolvedImageSource {
                r#ref: r#ref.into(),
                resolved_ref: Some(format!("r/c@{DIGEST}")),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    #[test]
    fn a_digest_served_under_its_reference_is_pinned_and_never_polled() {
        let pinned = format!("r/c@{DIGEST}");
        let f = facts(&spec(&pinned, Some("1h")), Some(served(&pinned)));
        assert!(f.pinned_and_served);
        assert_eq!(f.interval, None);
        // Served under another reference: not pinned-and-served (the status must change).
        let f = facts(&spec(&pinned, None), Some(served("r/c:latest")));
        assert!(!f.pinned_and_served);
        assert!(f.conditional);
    }

    #[test]
    fn a_tag_is_polled_and_checked_conditionally_once_something_is_served() {
        let f = facts(&spec("r/c:latest", Some("1h")), Some(served("r/c:latest")));
        assert!(!f.pinned_and_served);
        assert!(f.conditional);
        assert!(f.interval.is_some());
        let first = facts(&spec("r/c:latest", Some("1h")), None);
        assert!(!first.conditional);
    }
}
