//! What every olm-rs manager binary shares: client setup, metrics, health endpoints, leader
//! election, tracing, shutdown and events. Filled as the managers are built.
