//! catalogd's memory bound: what it needs besides content, plus what the unpack budget
//! (the puller's [`olm_puller::budget`], re-exported here) lets content cost; the formula
//! docs/install.md gives and the chart checks against its memory limit.

pub use olm_puller::budget::{Reserve, UnpackBudget};
use olm_puller::budget::{UNPACK_FACTOR, ZSTD_WINDOW_BYTES};

/// What catalogd needs besides content: the runtime, the clients and caches, the content
/// server, the served catalogs' indexes (measured: docs/performance.md).
pub const BASE_BYTES: u64 = 128 << 20;
/// The settings the memory bound depends on.
#[derive(Debug, Clone, Copy)]
pub struct MemorySettings {
    /// `--max-content-bytes`.
    pub max_content_bytes: u64,
    /// `--unpack-budget-bytes`.
    pub unpack_budget_bytes: u64,
    /// `--max-concurrent-generators`: each held upload is at most `max_content_bytes`.
    pub max_concurrent_generators: u64,
    /// `--max-concurrent-pulls`: each decodes with one zstd window.
    pub max_concurrent_pulls: u64,
    /// `--max-served-index-bytes`: the served catalogs' in-memory indexes.
    pub max_served_index_bytes: u64,
}

/// The most memory catalogd uses with `s`, the formula docs/install.md gives and the chart
/// checks against its memory limit: `BASE + UNPACK_FACTOR × budget + generators × max
/// content + pulls × zstd window + served indexes`.
pub fn memory_bound(s: MemorySettings) -> u64 {
    BASE_BYTES
        .saturating_add(UNPACK_FACTOR.saturating_mul(s.unpack_budget_bytes))
        .saturating_add(
            s.max_concurrent_generators
                .saturating_mul(s.max_content_bytes),
        )
        .saturating_add(s.max_concurrent_pulls.saturating_mul(ZSTD_WINDOW_BYTES))
        .saturating_add(s.max_served_index_bytes)
}

/// Why the settings cannot bound memory: a catalog larger than the budget could never be
/// unpacked within it.
pub fn check_settings(s: MemorySettings) -> Result<(), String> {
    if s.max_content_bytes > s.unpack_budget_bytes {
        return Err(format!(
            "--max-content-bytes ({}) is larger than --unpack-budget-bytes ({}): one catalog would not fit the budget that bounds catalogd's memory; raise the budget (and the memory limit: docs/install.md) or lower the limit",
            s.max_content_bytes, s.unpack_budget_bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_fit_the_charts_memory_limit_and_a_catalog_fits_the_budget() {
        let defaults = MemorySettings {
            max_content_bytes: 64 << 20,
            unpack_budget_bytes: 64 << 20,
            max_concurrent_generators: 2,
            max_concurrent_pulls: 2,
            max_served_index_bytes: 96 << 20,
        };
        assert_eq!(memory_bound(defaults), (128 + 640 + 128 + 16 + 96) << 20);
        assert!(memory_bound(defaults) <= 1 << 30, "the chart's 1Gi");
        assert!(check_settings(defaults).is_ok());
        let err = check_settings(MemorySettings {
            max_content_bytes: 65 << 20,
            ..defaults
        })
        .unwrap_err();
        assert!(err.contains("--unpack-budget-bytes"), "{err}");
    }
}
