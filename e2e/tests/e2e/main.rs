//! End-to-end tests against a real control plane (see `olm_e2e::cluster`). One binary, so the
//! control plane is started once for all of them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod catalogd;
mod custom;
mod garbage_collection;
mod git;
mod images;
mod network;
mod operators;
mod operators_cluster;
mod provisioner;
mod provisioner_bundles;
mod provisioner_controller;
mod provisioner_crd_safety;
mod provisioner_fetch;
mod provisioner_health;
mod provisioner_helm;
mod provisioner_install_modes;
mod provisioner_kustomize;
mod provisioner_ownership;
mod provisioner_registry;
mod provisioner_restart;
mod provisioner_watches;
mod provisioner_webhooks;
mod samples;
mod switcher;
mod validation;
mod version;
