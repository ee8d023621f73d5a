//! The olm-rs resolver: File-Based Catalog model, parser, validator, version ranges and joint
//! resolution with explanations. It has no Kubernetes dependency, so catalogd, the
//! operator-controller and the `olm-resolve` CLI all use the same code.

#[cfg(feature = "cli")]
pub mod cli;
pub mod fbc;
pub mod names;
pub mod range;
pub mod resolve;
#[cfg(feature = "synth")]
pub mod synth;
