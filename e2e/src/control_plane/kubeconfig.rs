//! The admin kubeconfig of the control plane, built as kube's own serde type.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use super::folder::io_error;
use super::pki::{Pair, Pki};
use crate::{Error, Result};

/// The name of the cluster, the user and the context.
pub const NAME: &str = "olm-rs-test";

/// A kubeconfig that reaches `server` as the admin of `pki`, its one context current.
pub fn admin(server: &str, pki: &Pki) -> Kubeconfig {
    client(server, pki, &pki.admin)
}

/// A kubeconfig that reaches `server` with the client certificate `user` of `pki`.
pub fn client(server: &str, pki: &Pki, user: &Pair) -> Kubeconfig {
    let b64 = |pem: &str| STANDARD.encode(pem);
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(Cluster {
                server: Some(server.into()),
                certificate_authority_data: Some(b64(&pki.ca)),
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: NAME.into(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(b64(&user.cert)),
                client_key_data: Some(b64(&user.key).into()),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(NAME.into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    }
}

/// Writes `config` to `path` as YAML.
pub fn write(config: &Kubeconfig, path: &Path) -> Result<()> {
    let mut yaml = serde_saphyr::to_string(config)
        .map_err(|e| Error::Document(format!("writing the kubeconfig: {e}")))?;
    if !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    std::fs::write(path, yaml).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use kube::config::KubeConfigOptions;

    use super::*;

    #[tokio::test]
    async fn the_written_kubeconfig_loads_as_a_client_config_for_the_admin() {
        crate::install_crypto_provider();
        let pki = Pki::generate(&[], "n1").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        write(&admin("https://127.0.0.1:6443", &pki), &path).unwrap();

        let read = Kubeconfig::read_from(&path).unwrap();
        assert_eq!(read.current_context.as_deref(), Some(NAME));
        let config = kube::Config::from_custom_kubeconfig(read, &KubeConfigOptions::default())
            .await
            .unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        let identity = config
            .auth_info
            .client_key_data
            .as_ref()
            .map(|k| secrecy::ExposeSecret::expose_secret(k).to_owned());
        assert_eq!(identity, Some(STANDARD.encode(&pki.admin.key)));
        // The client is built from it as the harness builds one (TLS identity included).
        kube::Client::try_from(config).unwrap();
    }
}
