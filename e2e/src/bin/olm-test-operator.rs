//! olm-test-operator: the webhooks and aggregated API the end-to-end tests install as a
//! registry+v1 operator (see `olm_e2e::test_operator`).

use std::path::PathBuf;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(9443);
    let dir = std::env::var_os("CERT_DIR").map_or_else(
        || PathBuf::from(olm_e2e::test_operator::CERT_DIR),
        PathBuf::from,
    );
    olm_e2e::test_operator::run(port, dir).await
}
