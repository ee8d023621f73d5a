//! Bundle formats: each a pure conversion from a bundle's file tree to the objects to apply,
//! or (Helm charts, kustomizations) what to run to render them and how to read what it prints.
//! The template's `provisionerClassName` names the format.

pub mod helm;
pub mod kustomize;
pub mod manifests;
pub mod plain;
pub mod registry;
pub mod rendered;
