//! Clients of the control plane's API server.

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Result, kube_err};

/// Installs rustls's `ring` provider for the process (the clients of the API server).
pub fn install_crypto_provider() {
    olm_testkit::install_crypto_provider();
}

/// A client of the cluster `kubeconfig` reaches, as its current context says.
pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::Cluster(format!("reading {}: {e}", kubeconfig.display())))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Cluster(format!("loading {}: {e}", kubeconfig.display())))?;
    Client::try_from(config).map_err(kube_err("building a client"))
}
