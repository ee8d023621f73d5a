//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! * [`controller`]: the Catalog controller and its watches; [`context`]: what reconciles share.
//! * [`plan`]: what a reconcile does, decided by a pure function; [`poll`]: its timing.
//! * [`reconcile`]: carries a plan out (fetch, [`unpack`] under the [`budget`], status, events).
//! * [`source`]: one implementation per member of `spec.source`.
//! * [`store`]: hash-addressed content with atomic swap; the last good content is kept.
//! * [`server`]: the HTTP content server (`all.json` and the metas query API);
//!   [`manager::api`]: the read-only aggregated API over the same store
//!   (`catalogs.olm-rs.io`, [`catalogd_api`]).
//! * [`follow`]: what a follower replica does: copy the leader's served content.
//! * [`status`]: the status catalogd writes, as pure functions.
//! * [`metrics`]: the `catalogd_*` metric families.
//! * [`namespace`]: the Pod Security label of catalogd's namespace.
//! * [`manager`]: catalogd's steps as a manager (prepare, follow, lead, drain), from its
//!   [`args`]; [`orphans`]: the start-up clean-up of the store.

pub mod args;
pub mod budget;
pub mod collect;
pub mod context;
pub mod controller;
pub mod follow;
pub mod manager;
pub mod metrics;
pub mod namespace;
pub mod orphans;
pub mod plan;
pub mod reconcile;
pub mod server;
pub mod status;

/// The sources and their contract, from their own crate.
pub use catalogd_sources as source;
/// The poll timing, from the sources' crate.
pub use catalogd_sources::poll;
/// The content store, from its own crate.
pub use catalogd_store::store;
pub mod unpack;
