//! The leader election flags every manager takes (`#[command(flatten)]`).

use std::time::Duration;

/// Leader election on a `coordination.k8s.io` Lease, so that of several replicas only one
/// reconciles.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderElectionArgs {
    /// Elect a leader on a Lease; only the leader reconciles. Off, this process always writes:
    /// run one replica only.
    #[arg(long, default_value_t = false)]
    pub leader_elect: bool,
    /// The Lease's name (default: `olm-rs-<manager>`).
    #[arg(long)]
    pub leader_election_lease_name: Option<String>,
    /// The Lease's namespace.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm-system")]
    pub leader_election_namespace: String,
    /// This replica's identity in the Lease (default: the Pod's name or host name, and a random
    /// suffix, so a restarted process is a new candidate).
    #[arg(long)]
    pub leader_election_identity: Option<String>,
    /// How long a lease lasts without renewal, in seconds: a new leader takes over at most
    /// this long after the old one dies or is cut off from the API server.
    #[arg(long, default_value_t = 15)]
    pub leader_election_lease_duration_seconds: u64,
    /// How long before the lease runs out the leader renews it, in seconds. The leader stops
    /// writing half this long before its lease runs out, so clocks may disagree by up to that.
    #[arg(long, default_value_t = 5)]
    pub leader_election_renew_grace_seconds: u64,
}

impl LeaderElectionArgs {
    /// The lease's name for `manager`.
    pub fn lease_name(&self, manager: &str) -> String {
        self.leader_election_lease_name
            .clone()
            .unwrap_or_else(|| format!("olm-rs-{manager}"))
    }

    /// The lease duration and renew grace, in seconds, made consistent: a lease of at least
    /// 2 s, renewed at least 1 s and at most half its duration before it runs out.
    pub fn timings(&self) -> (u64, u64) {
        let duration = self.leader_election_lease_duration_seconds.max(2);
        let grace = self
            .leader_election_renew_grace_seconds
            .clamp(1, duration / 2);
        (duration, grace)
    }

    /// How long before the lease runs out this replica stops writing.
    pub fn write_margin(&self) -> Duration {
        Duration::from_millis(self.timings().1 * 500)
    }
}

/// This process's default identity: the Pod's name (or host name) and a random suffix.
pub fn default_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "olm-rs".to_owned());
    // std's RandomState is seeded from the OS's randomness once per process: enough to tell
    // two processes on one host apart without another dependency.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("{host}_{:08x}", hasher.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::{LeaderElectionArgs, default_identity};
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        election: LeaderElectionArgs,
    }

    #[test]
    fn timings_are_made_consistent() {
        let parse = |args: &[&str]| {
            Flags::parse_from(std::iter::once("m").chain(args.iter().copied())).election
        };
        let defaults = parse(&[]);
        assert!(!defaults.leader_elect);
        assert_eq!(defaults.timings(), (15, 5));
        assert_eq!(defaults.write_margin().as_millis(), 2500);
        assert_eq!(defaults.lease_name("catalogd"), "olm-rs-catalogd");
        let odd = parse(&[
            "--leader-election-lease-duration-seconds=4",
            "--leader-election-renew-grace-seconds=9",
        ]);
        assert_eq!(odd.timings(), (4, 2));
        let zero = parse(&[
            "--leader-election-lease-duration-seconds=0",
            "--leader-election-renew-grace-seconds=0",
        ]);
        assert_eq!(zero.timings(), (2, 1));
    }

    #[test]
    fn identities_differ_between_candidates() {
        assert_ne!(default_identity(), default_identity());
    }
}
