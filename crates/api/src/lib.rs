//! Kubernetes API types of olm-rs.
//!
//! Every type here is wire-compatible with the upstream OLM v1 API of the same group and version
//! (see `docs/api.md`): `Catalog` (catalogd), `Operator` (operator-controller),
//! `BundleDeployment` (rukpak) and a minimal OLM v0 `CatalogSource` for the catalog-switcher.
//! The CRD YAML in `config/crd/` and in the chart is generated from these types by `crdgen`.

// `#[kube(printcolumn(...))]` repeats `type_ = ...` per column, which clippy mistakes for a
// duplicated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod bundle_deployment;
pub mod catalog;
pub mod catalog_source_v0;
pub mod conditions;
pub mod crds;
pub mod operator;
pub mod schema;

pub use bundle_deployment::BundleDeployment;
pub use catalog::Catalog;
pub use catalog_source_v0::CatalogSource;
pub use operator::Operator;
