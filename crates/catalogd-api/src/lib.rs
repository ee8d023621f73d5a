//! catalogd's read-only aggregated API, `catalogs.olm-rs.io/v1alpha1`: the content catalogd
//! serves, as cluster-scoped `packages`, `channels`, `bundles` and `metas` the API server
//! proxies to (`kubectl get packages`), read from the content store's index: no etcd, no
//! copies. docs/catalogs.md describes it for users.
//!
//! * Decisions, pure: [`names`] (object names), [`select`] (label and field selectors),
//!   [`page`] (limit and continue), [`kinds`] (what each kind lists, its columns),
//!   [`summary`] (columns no one blob says), [`objects`] (an item as an object),
//!   [`table`] (server-side printing), [`discovery`] (legacy and aggregated documents),
//!   [`authn`] (the front proxy's headers), [`status`] (errors as `Status`).
//! * With I/O around them: [`content`] (the served content, opened), [`query`] (selecting and
//!   writing items), [`review`] (TokenReview, SubjectAccessReview), [`watch`] (events on
//!   content changes), [`server`] (the routes) and [`state`] (what they share), [`listener`] (TLS that tells the front proxy
//!   from other clients).

pub mod authn;
pub mod content;
pub mod discovery;
pub mod kinds;
pub mod listener;
pub mod names;
pub mod objects;
pub mod page;
pub mod query;
pub mod review;
pub mod select;
pub mod server;
pub mod state;
pub mod status;
pub mod summary;
pub mod table;
pub mod watch;
