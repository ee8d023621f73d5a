//! Bundle formats: each a pure conversion from a bundle's file tree to the objects to apply.
//! The template's `provisionerClassName` names the format.

pub mod manifests;
pub mod plain;
pub mod registry;
