//! A budget on the bytes of content held at once, across concurrent reconciles: a fetched
//! body, and parsing, validating and storing it, cost memory proportional to its size (see
//! docs/performance.md), so the sum of those sizes is what must be bounded, not the number of
//! reconciles. A source takes its share **before** it reads a body ([`Reserve`]), for the most
//! that body may be (its announced length, or `--max-content-bytes`), and the share shrinks
//! to what was read; so fetched bodies never pile up outside the budget. A manager refuses to
//! start with `--max-content-bytes` above its budget, so one body always fits.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// Permits are KiB, so a u32 request covers any size.
const UNIT: u64 = 1024;

/// What a byte of content costs at most while it is held and unpacked (the worst case,
/// catalogs of the smallest blobs, measured 9 to 10; realistic ones about 3).
pub const UNPACK_FACTOR: u64 = 10;
/// The zstd window one image pull may decode with (`filesystem::ZSTD_WINDOW_LOG_MAX`).
pub const ZSTD_WINDOW_BYTES: u64 = 8 << 20;

/// The unpack budget, shared by every reconcile.
#[derive(Debug, Clone)]
pub struct UnpackBudget {
    semaphore: Arc<Semaphore>,
    units: u32,
}

/// A share of the budget, released when dropped.
#[derive(Debug)]
pub struct Share {
    permit: OwnedSemaphorePermit,
}

impl Share {
    /// The bytes it holds (rounded up to KiB).
    pub fn bytes(&self) -> u64 {
        self.permit.num_permits() as u64 * UNIT
    }

    /// Gives back what exceeds `bytes` (a body turned out smaller than reserved).
    pub fn shrink_to(&mut self, bytes: u64) {
        let keep = usize::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(usize::MAX)
            .max(1);
        let held = self.permit.num_permits();
        if held > keep {
            drop(self.permit.split(held - keep));
        }
    }
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

    /// The whole budget, in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.units) * UNIT
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
            .map(|permit| Share { permit })
    }

    /// A share for `bytes`, waiting until enough of the budget is free. `None` only if the
    /// budget were closed, which it never is.
    pub async fn acquire(&self, bytes: u64) -> Option<Share> {
        self.semaphore
            .clone()
            .acquire_many_owned(self.units_for(bytes))
            .await
            .ok()
            .map(|permit| Share { permit })
    }

    /// Bytes of the budget free now.
    pub fn available(&self) -> u64 {
        self.semaphore.available_permits() as u64 * UNIT
    }
}

/// One reconcile's claim on the budget. A source calls [`Reserve::reserve`] right before it
/// reads a body into memory; the reconcile then takes the share ([`Reserve::take`]) for the
/// unpack. While a reservation waits for others to finish, [`Reserve::new`]'s receiver says
/// how many bytes it waits for (the reconcile writes `UnpackPending`).
#[derive(Debug)]
pub struct Reserve {
    budget: UnpackBudget,
    held: Mutex<Option<Share>>,
    waiting: watch::Sender<Option<u64>>,
}

impl Reserve {
    /// A claim on `budget`, and the receiver of its waits.
    pub fn new(budget: UnpackBudget) -> (Arc<Self>, watch::Receiver<Option<u64>>) {
        let (waiting, rx) = watch::channel(None);
        (
            Arc::new(Self {
                budget,
                held: Mutex::default(),
                waiting,
            }),
            rx,
        )
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<Share>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds a share for `bytes` (capped at the whole budget), waiting for it if others hold
    /// too much; a share held already and large enough is kept.
    pub async fn reserve(&self, bytes: u64) {
        let want = self.budget.units_for(bytes) as u64 * UNIT;
        if self.held().as_ref().is_some_and(|s| s.bytes() >= want) {
            return;
        }
        // Whatever is held is given back first, so two claims of one reconcile never wait on
        // each other.
        drop(self.held().take());
        let share = match self.budget.try_acquire(bytes) {
            Some(share) => Some(share),
            None => {
                self.waiting.send_replace(Some(bytes));
                let share = self.budget.acquire(bytes).await;
                self.waiting.send_replace(None);
                share
            }
        };
        *self.held() = share;
    }

    /// The share held, if any.
    pub fn take(&self) -> Option<Share> {
        self.held().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reservation_waits_says_so_and_shrinks_to_what_was_read() {
        let budget = UnpackBudget::new(10 * 1024);
        let (first, _) = Reserve::new(budget.clone());
        first.reserve(8 * 1024).await;
        let (second, mut waiting) = Reserve::new(budget.clone());
        let task = {
            let second = second.clone();
            tokio::spawn(async move { second.reserve(8 * 1024).await })
        };
        waiting.changed().await.unwrap();
        assert_eq!(*waiting.borrow(), Some(8 * 1024), "it says it waits");
        // The first body was smaller than reserved: what it gives back lets the second in.
        let mut share = first.take().unwrap();
        share.shrink_to(2 * 1024);
        assert_eq!(share.bytes(), 2 * 1024);
        task.await.unwrap();
        assert_eq!(budget.available(), 0);
        drop(share);
        assert_eq!(second.take().unwrap().bytes(), 8 * 1024);
        assert_eq!(budget.available(), 10 * 1024);
    }

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
