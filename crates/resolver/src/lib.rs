//! The olm-rs resolver: FBC model, parser, validator, version ranges and joint resolution.
//! It has no Kubernetes dependency. Built by issue #3; this crate is its place in the workspace.
