//! catalogd's content store and content server, without a Kubernetes client: what a
//! Catalog's validated content becomes on disk (canonical `all.json`, its gzip and index,
//! swapped atomically, the last good content kept), and the HTTP API that serves it.
//!
//! * [`store`]: hash-addressed content with atomic swap and a bounded in-memory index.
//! * [`server`]: the router of `all.json`, upstream's `api/v1/all` and the metas query API;
//!   [`conditions`] and [`range`], the conditional and range requests it answers as upstream
//!   (Go's `http.ServeContent`) does.

pub mod conditions;
pub mod range;
pub mod server;
pub mod store;
