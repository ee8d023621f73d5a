//! What every olm-rs manager binary shares, so the four managers (catalogd,
//! operator-controller, catalog-switcher and provisioner) start, observe and stop the same way.
//!
//! A manager's `main` parses its flags and hands its own steps to [`manager::run`], which
//! runs, in this order ([`start()`] does steps 1 to 4 and joins leader election, [`leader`]):
//!
//! 1. [`telemetry::init_tracing`] — logs first, so every later failure is visible;
//! 2. [`shutdown::shutdown_on_signals`] — one [`CancellationToken`](tokio_util::sync::CancellationToken)
//!    that every controller and server stops on;
//! 3. [`client::client`] — installs the rustls `ring` provider, then builds the kube client;
//! 4. [`metrics::Metrics::new`] and [`admin::Readiness`] — shared by the controllers;
//! 5. [`admin::AdminServer::spawn`] — `/metrics`, `/healthz`, `/readyz` on their own port;
//! 6. the manager's preparation, then its leader's work: controllers run by
//!    [`controller::Run`], which times and counts every reconcile, each reporting through
//!    [`events::EventPublisher`].

pub mod admin;
pub mod client;
pub mod controller;
pub mod error;
pub mod error_chain;
pub mod events;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod readiness;
pub mod retry;
pub mod shutdown;
pub mod start;
pub mod telemetry;
pub mod tls;

pub use admin::{Readiness, ReadinessHandle, bind_admin, router, serve_admin, serve_admin_on};
pub use client::{client, install_crypto_provider};
pub use error::Error;
pub use error_chain::error_chain;
pub use events::EventPublisher;
pub use kube::runtime::events::EventType;
pub use metrics::{Metrics, ReconcileOutcome, ReconcileTimer};
pub use shutdown::{ShutdownArgs, drain, shutdown_on_signals, try_shutdown_on_signals};
pub use start::{RuntimeArgs, StartOptions, Started, start};
pub use telemetry::{LogFormat, init_tracing};
