//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! * [`controller`] and [`reconcile`]: the Catalog controller (fetch, parse and validate, store,
//!   status, events).
//! * [`source`]: one implementation per member of `spec.source`.
//! * [`store`]: hash-addressed content with atomic swap; the last good content is kept.
//! * [`server`]: the HTTP content server (`all.json` and the metas query API).
//! * [`status`]: the status catalogd writes, as pure functions.
//! * [`metrics`]: the `catalogd_*` metric families.

pub mod controller;
pub mod metrics;
pub mod reconcile;
pub mod server;
pub mod source;
pub mod status;
pub mod store;
