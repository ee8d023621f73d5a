//! Timing, as pure functions: poll intervals, their jitter, and the retry schedule after a
//! failure.

use std::time::Duration;

/// The shortest poll interval catalogd honours; the CRD refuses shorter ones, so this only
/// guards against objects stored before that rule (a shorter one would hammer the source).
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The longest; the CRD refuses longer ones. Beyond it is no poll at all, and huge values must
/// not overflow timers.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The first retry after a failure; each further consecutive failure doubles it.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// A Go duration (`90s`, `10m`, `1h30m`, `1.5h`), parsed as the API server's `metav1.Duration`
/// parses it; `None` when it does not parse, is negative, or is absurdly long.
pub fn parse_duration(text: &str) -> Option<Duration> {
    // kube's parser multiplies floats into a Duration and panics past its range: refuse
    // inputs that could get there (13 digits of hours is already 10^8 years).
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    if text.len() > 32 || digits > 12 {
        return None;
    }
    let parsed: kube::core::Duration = text.parse().ok()?;
    if parsed.is_negative() {
        return None;
    }
    Some(parsed.into())
}

/// A catalog's `pollInterval`, clamped to [`MIN_POLL_INTERVAL`], [`MAX_POLL_INTERVAL`]; `None`
/// when absent or unparsable (no polling).
pub fn poll_interval(text: Option<&str>) -> Option<Duration> {
    parse_duration(text?).map(|d| d.clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL))
}

/// `d` plus up to 5% of it, chosen by `seed`, so many catalogs polled at the same interval do
/// not poll in lockstep.
pub fn jitter(d: Duration, seed: u64) -> Duration {
    let fraction = (seed % 1000) as f64 / 1000.0 * 0.05;
    d.saturating_add(d.mul_f64(fraction))
}

/// A seed for [`jitter`] that varies per catalog and per call.
pub fn jitter_seed(name: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(name.as_bytes());
    h.finish()
}

/// The wait before retrying after the `failures`th consecutive failure (1-based): 5 s, 10 s,
/// 20 s, ... up to 5 min.
pub fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1u32 << doublings).min(MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_the_api_server_parses_them() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        assert_eq!(parse_duration("often"), None);
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("-5m"), None);
    }

    #[test]
    fn huge_durations_are_refused_not_a_panic() {
        assert_eq!(parse_duration("9999999999999999999h"), None);
        assert_eq!(parse_duration(&"9h".repeat(40)), None);
        assert!(parse_duration("999999999999h").is_some());
    }

    #[test]
    fn poll_intervals_are_clamped() {
        assert_eq!(poll_interval(Some("1ms")), Some(MIN_POLL_INTERVAL));
        assert_eq!(poll_interval(Some("0s")), Some(MIN_POLL_INTERVAL));
        assert_eq!(
            poll_interval(Some("999999999999h")),
            Some(MAX_POLL_INTERVAL)
        );
        assert_eq!(poll_interval(Some("10m")), Some(Duration::from_secs(600)));
        assert_eq!(poll_interval(None), None);
    }

    #[test]
    fn jitter_adds_at_most_five_percent_and_never_overflows() {
        let d = Duration::from_secs(100);
        for seed in [0, 1, 499, 999, u64::MAX] {
            let j = jitter(d, seed);
            assert!(j >= d && j <= Duration::from_secs(105), "{j:?}");
        }
        assert_eq!(
            jitter(Duration::from_secs(100), 500),
            Duration::from_millis(102_500)
        );
        assert_eq!(jitter(Duration::MAX, 999), Duration::MAX);
    }

    #[test]
    fn retries_back_off_from_5_s_doubling_to_5_min() {
        let schedule: Vec<u64> = (1..=9).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(schedule, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(retry_after(0), FIRST_RETRY);
        assert_eq!(retry_after(u32::MAX), MAX_RETRY);
    }
}
