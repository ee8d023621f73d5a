//! How long this replica may still write, from the Lease as last seen. Pure, so the rule that
//! keeps a paused or partitioned leader from writing is tested without a cluster.
//!
//! Other replicas take the lease over once their clock passes `renewTime +
//! leaseDurationSeconds`. The holder stops writing `margin` earlier, so clocks that disagree by
//! less than the margin never leave two replicas writing at once.

use k8s_openapi::api::coordination::v1::LeaseSpec;
use std::time::{Duration, SystemTime};

/// How long from `now` writes stay allowed: until the lease's `renewTime +
/// leaseDurationSeconds − margin`, if `identity` holds it. `None` when another replica (or
/// nobody) holds it, when it records no renewal or duration, or when that moment has passed.
pub fn write_window(
    spec: Option<&LeaseSpec>,
    identity: &str,
    now: SystemTime,
    margin: Duration,
) -> Option<Duration> {
    let spec = spec?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = SystemTime::from(spec.renew_time.as_ref()?.0);
    let duration = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?);
    let until = renewed.checked_add(duration)?.checked_sub(margin)?;
    until
        .duration_since(now)
        .ok()
        .filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::write_window;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::Timestamp;
    use std::time::{Duration, SystemTime};

    const MARGIN: Duration = Duration::from_secs(2);

    fn spec(holder: Option<&str>, renewed: Option<SystemTime>, seconds: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: renewed
                .map(|t| MicroTime(Timestamp::try_from(t).expect("a representable time"))),
            lease_duration_seconds: seconds,
            ..Default::default()
        }
    }

    fn at(base: SystemTime, seconds: u64) -> SystemTime {
        base + Duration::from_secs(seconds)
    }

    #[test]
    fn the_holder_writes_until_the_lease_runs_out_less_the_margin() {
        let renewed = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let lease = spec(Some("a"), Some(renewed), Some(15));
        assert_eq!(
            write_window(Some(&lease), "a", renewed, MARGIN),
            Some(Duration::from_secs(13))
        );
        assert_eq!(
            write_window(Some(&lease), "a", at(renewed, 10), MARGIN),
            Some(Duration::from_secs(3))
        );
        // At and past renewTime + duration − margin: nothing, although the lease itself has
        // not run out yet (a paused leader resuming here must not write).
        assert_eq!(
            write_window(Some(&lease), "a", at(renewed, 13), MARGIN),
            None
        );
        assert_eq!(
            write_window(Some(&lease), "a", at(renewed, 14), MARGIN),
            None
        );
        assert_eq!(
            write_window(Some(&lease), "a", at(renewed, 600), MARGIN),
            None
        );
    }

    #[test]
    fn another_holder_no_holder_or_an_incomplete_lease_allows_nothing() {
        let renewed = SystemTime::now();
        let now = renewed;
        assert_eq!(
            write_window(
                Some(&spec(Some("b"), Some(renewed), Some(15))),
                "a",
                now,
                MARGIN
            ),
            None
        );
        assert_eq!(
            write_window(Some(&spec(None, Some(renewed), Some(15))), "a", now, MARGIN),
            None
        );
        assert_eq!(
            write_window(Some(&spec(Some("a"), None, Some(15))), "a", now, MARGIN),
            None
        );
        assert_eq!(
            write_window(
                Some(&spec(Some("a"), Some(renewed), None)),
                "a",
                now,
                MARGIN
            ),
            None
        );
        assert_eq!(
            write_window(
                Some(&spec(Some("a"), Some(renewed), Some(-5))),
                "a",
                now,
                MARGIN
            ),
            None
        );
        assert_eq!(write_window(None, "a", now, MARGIN), None);
    }

    #[test]
    fn a_margin_longer_than_the_lease_allows_nothing() {
        let renewed = SystemTime::now();
        let lease = spec(Some("a"), Some(renewed), Some(1));
        assert_eq!(write_window(Some(&lease), "a", renewed, MARGIN), None);
    }
}
