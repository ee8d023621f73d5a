//! A budget on the bytes being unpacked at once, across concurrent reconciles: parsing,
//! validating and storing a catalog costs memory proportional to its size (see
//! docs/performance.md), so the sum of the sizes being unpacked is what must be bounded, not
//! the number of reconciles. A catalog larger than the whole budget still unpacks, alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Permits are KiB, so a u32 request covers any size.
const UNIT: u64 = 1024;

/// The unpack budget, shared by every reconcile.
#[derive(Debug, Clone)]
pub struct UnpackBudget {
    semaphore: Arc<Semaphore>,
    units: u32,
}

/// A share of the budget, released when dropped.
#[derive(Debug)]
pub struct Share {
    _permit: OwnedSemaphorePermit,
}

impl UnpackBudget {
    /// A budget of `bytes` (at least 1 KiB).
    pub fn new(bytes: u64) -> Self {
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(units as usize)),
            units,
        }
    }

    /// How many units `bytes` takes: its size, capped at the whole budget.
    fn units_for(&self, bytes: u64) -> u32 {
        u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, self.units)
    }

    /// A share for `bytes` if available now.
    pub fn try_acquire(&self, bytes: u64) -> Option<Share> {
        self.semaphore
            .clone()
            .try_acquire_many_owned(self.units_for(bytes))
            .ok()
            .map(|p| Share { _permit: p })
    }

    /// A share for `bytes`, waiting until enough of the budget is free. `None` only if the
    /// budget were closed, which it never is.
    pub async fn acquire(&self, bytes: u64) -> Option<Share> {
        self.semaphore
            .clone()
            .acquire_many_owned(self.units_for(bytes))
            .await
            .ok()
            .map(|p| Share { _permit: p })
    }

    /// Bytes of the budget free now.
    pub fn available(&self) -> u64 {
        self.semaphore.available_permits() as u64 * UNIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_add_up_to_the_budget_and_a_huge_one_takes_it_all() {
        let budget = UnpackBudget::new(10 * 1024);
        let a = budget.try_acquire(6 * 1024).unwrap();
        assert!(budget.try_acquire(6 * 1024).is_none(), "over budget");
        let b = budget.try_acquire(4 * 1024).unwrap();
        assert_eq!(budget.available(), 0);
        drop((a, b));
        // Larger than the whole budget: it waits for all of it, then runs alone.
        let all = budget.acquire(1 << 40).await.unwrap();
        assert!(budget.try_acquire(1).is_none());
        drop(all);
        assert_eq!(budget.available(), 10 * 1024);
    }
}
