//! The control plane's kubeconfigs, built as kube's own serde type (never as text): the
//! admin's, a client certificate's, and a bearer token's (the managers run as their
//! ServiceAccounts with one).

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use super::folder::io_error;
use super::pki::{Pair, Pki};
use crate::error::{Error, Result};

/// The name of the cluster, the user and the context.
pub const NAME: &str = "olm-rs-test";

/// A kubeconfig that reaches `server` as the admin of `pki`, its one context current.
pub fn admin(server: &str, pki: &Pki) -> Kubeconfig {
    client(server, pki, &pki.admin)
}

/// A kubeconfig that reaches `server` with the client certificate `user` of `pki`.
pub fn client(server: &str, pki: &Pki, user: &Pair) -> Kubeconfig {
    let b64 = |pem: &str| STANDARD.encode(pem);
    let cluster = Cluster {
        server: Some(server.into()),
        certificate_authority_data: Some(b64(&pki.ca)),
        ..Cluster::default()
    };
    let auth = AuthInfo {
        client_certificate_data: Some(b64(&user.cert)),
        client_key_data: Some(b64(&user.key).into()),
        ..AuthInfo::default()
    };
    one_context(cluster, NAME, auth)
}

/// A kubeconfig that reaches `cluster` as `user` with the bearer `token`, its one context
/// current.
pub fn token(cluster: Cluster, user: &str, token: &str) -> Kubeconfig {
    let auth = AuthInfo {
        token: Some(token.to_owned().into()),
        ..AuthInfo::default()
    };
    one_context(cluster, user, auth)
}

/// A kubeconfig of one cluster, one user (`user`, authenticated by `auth`) and the one context
/// joining them, current.
fn one_context(cluster: Cluster, user: &str, auth: AuthInfo) -> Kubeconfig {
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.into(),
            auth_info: Some(auth),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(user.into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    }
}

/// The cluster `config`'s current context names (a reused kubeconfig may name several), else
/// its first.
pub fn current_cluster(config: &Kubeconfig) -> Option<Cluster> {
    let wanted = config
        .current_context
        .as_ref()
        .and_then(|name| config.contexts.iter().find(|c| &c.name == name))
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    config
        .clusters
        .iter()
        .find(|c| Some(&c.name) == wanted.as_ref())
        .or(config.clusters.first())
        .and_then(|c| c.cluster.clone())
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

    /// `config` written to a file, read back, and loaded as kube loads a client's config.
    async fn written_and_loaded(config: &Kubeconfig) -> (Kubeconfig, kube::Config) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        write(config, &path).unwrap();
        let read = Kubeconfig::read_from(&path).unwrap();
        let loaded =
            kube::Config::from_custom_kubeconfig(read.clone(), &KubeConfigOptions::default())
                .await
                .unwrap();
        (read, loaded)
    }

    #[tokio::test]
    async fn the_written_kubeconfig_loads_as_a_client_config_for_the_admin() {
        crate::client::install_crypto_provider();
        let pki = Pki::generate(&[], "n1").unwrap();
        let (read, config) = written_and_loaded(&admin("https://127.0.0.1:6443", &pki)).await;
        assert_eq!(read.current_context.as_deref(), Some(NAME));
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

    #[tokio::test]
    async fn a_token_kubeconfig_reaches_the_current_cluster_with_the_token_only() {
        crate::client::install_crypto_provider();
        let pki = Pki::generate(&[], "n1").unwrap();
        let mut admin = admin("https://127.0.0.1:6443", &pki);
        // A reused kubeconfig naming another cluster first: the current context's is taken.
        let mut other = admin.clusters[0].clone();
        other.name = "elsewhere".into();
        if let Some(c) = other.cluster.as_mut() {
            c.server = Some("https://192.0.2.1:6443".into());
        }
        admin.clusters.insert(0, other);
        let cluster = current_cluster(&admin).unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));

        let (_, config) =
            written_and_loaded(&token(cluster, "olm-system-catalogd", "secret-token")).await;
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        let token = config
            .auth_info
            .token
            .as_ref()
            .map(|t| secrecy::ExposeSecret::expose_secret(t).to_owned());
        assert_eq!(token.as_deref(), Some("secret-token"));
        // No client certificate of the admin travels with it.
        assert!(config.auth_info.client_key_data.is_none());
        assert!(config.auth_info.client_certificate_data.is_none());
    }
}
