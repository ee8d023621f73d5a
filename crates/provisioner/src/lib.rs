//! The provisioner: installs what a `BundleDeployment` names.
//!
//! This crate grows in steps (issue 22). [`fetch`] reads a template's content (bundle images,
//! ConfigMaps), [`apply`]'s `Applier` applies a bundle's objects to a cluster and [`set`]'s
//! `Set` keeps one BundleDeployment's applied set with it (installs, prunes, removes);
//! [`render`] runs Helm and kustomize as sandboxed children for the formats they define;
//! [`reconcile`] carries out a [`plan`] and [`controller`] runs it for every BundleDeployment
//! (all tested by the e2e tests); the rest is pure and tested without a cluster:
//!
//! * [`bundle`]: a bundle's file tree, as a source unpacked it.
//! * [`applyset`]: the applied set as a Kubernetes ApplySet (KEP-3659).
//! * [`object`]: an object of a bundle and the key that identifies it.
//! * [`order`]: the order of an apply (CRDs, Namespaces, identities, the rest).
//! * [`marks`]: the labels and owner reference every applied object carries, and whose an
//!   object found in the cluster is.
//! * [`conflict`]: objects that block an install (never adopted), and the message naming them.
//! * [`fields`]: whether an apply changed an object (our field manager's entry before and after).
//! * [`plan`]: what a reconcile of one BundleDeployment does (ignore, finalize, uninstall,
//!   refuse, install), decided from the object alone.
//! * [`prune`]: what an upgrade or a deletion removes, Namespaces and CRDs apart.
//! * [`namespaces`]: the namespaces bundles may use (never the managers').
//! * [`namespace_move`]: an upgrade that would move the install namespace (refused).
//! * [`held`]: what a Namespace holds that a BundleDeployment did not apply (why it is kept).
//! * [`settings`]: what a BundleDeployment's `spec.config` asks of an install (namespaces,
//!   Deployment settings, a chart's values, a kustomization's directory).
//! * [`values`]: a chart's values in Helm's merge order, and their hash.
//! * [`source`]: what a template asks to fetch and in which format (refusals before any fetch),
//!   and the `configMaps` source's files.
//! * [`status`]: the conditions after a reconcile (`Unpacked`, `HasValidBundle`, `Installed`,
//!   `Healthy`).
//! * [`health`]: whether installed objects work, from their status.
//! * [`template`]: the hash that names an unpacked template, and `status.activeBundle`.
//! * [`convert`]: a fetched tree made into objects by its format (in process or by its tool).
//! * [`kinds`]: the kinds bundles may hold (`--allowed-kinds`).
//! * [`crd_safety`]: whether a CRD upgrade is safe for what is stored (refused, naming why).
//! * [`certs`]: the serving certificates of webhooks and APIServices, when they rotate and how
//!   they are put in.
//! * [`drift`]: what each set was applied at, and the watches that tell when it moved.
//! * [`dry_run`]: what an install would change, without changing it.
//! * [`args`], [`manager`], [`metrics`]: the flags, the manager's steps and the
//!   `provisioner_*` metric families; [`preview`]: `provisioner render`, without a cluster.
//! * [`format`]: each bundle format as a pure conversion from a file tree to objects
//!   ([`format::plain`]: plain+v0; [`format::registry`]: registry+v1), or what to run for one
//!   a tool renders ([`format::helm`]: helm+v3; [`format::kustomize`]: kustomize) and how its
//!   output is read ([`format::rendered`]).

pub mod apply;
pub mod applyset;
pub mod args;
pub mod bundle;
pub mod certs;
pub mod conflict;
pub mod controller;
pub mod convert;
pub mod crd_safety;
pub mod drift;
pub mod dry_run;
pub mod fetch;
pub mod fields;
pub mod format;
pub mod health;
pub mod held;
pub mod kinds;
pub mod manager;
pub mod marks;
pub mod metrics;
pub mod namespace_move;
pub mod namespaces;
pub mod object;
pub mod order;
pub mod plan;
pub mod preview;
pub mod prune;
pub mod reconcile;
pub mod render;
pub mod set;
pub mod settings;
pub mod source;
pub mod status;
pub mod template;
pub mod values;
