//! CA bundles and HTTP credentials of the http and git sources; the opt-in of credential
//! Secrets is the puller's (re-exported here), shared with every manager that pulls.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub use olm_puller::credentials::{CREDENTIAL_LABEL, credential_selector, opted_in_secret};

use crate::contract::{SourceError, read_object, reasons};

/// The PEM certificates of the CA bundle `key` of the ConfigMap `namespace/name`.
pub async fn ca_bundle(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Vec<reqwest::Certificate>, SourceError> {
    let missing = SourceError::new(
        reasons::INVALID_CREDENTIALS,
        format!("CA bundle ConfigMap {namespace}/{name} not found"),
    );
    let cm: ConfigMap =
        read_object(client, namespace, name, "CA bundle ConfigMap", missing).await?;
    let pem = cm.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| {
        SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!("CA bundle ConfigMap {namespace}/{name} has no key {key:?}"),
        )
    })?;
    reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
        SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!("CA bundle {namespace}/{name} key {key:?} is not PEM: {e}"),
        )
    })
}

/// HTTP credentials from a Secret: a bearer `token`, or `username` (and `password`).
#[derive(Clone, PartialEq, Eq)]
pub enum HttpAuth {
    /// `Authorization: Bearer`.
    Bearer(String),
    /// `Authorization: Basic`.
    Basic(String, Option<String>),
}

impl std::fmt::Debug for HttpAuth {
    // Never print a credential, not even in a debug log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpAuth::Bearer(_) => f.write_str("Bearer(…)"),
            HttpAuth::Basic(user, _) => write!(f, "Basic({user:?}, …)"),
        }
    }
}

/// The HTTP credentials a Secret holds. A ServiceAccount token is never one, label or not.
pub fn http_auth(secret: &Secret, name: &str) -> Result<HttpAuth, SourceError> {
    if secret.type_.as_deref() == Some("kubernetes.io/service-account-token") {
        return Err(SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!("auth Secret {name} is a ServiceAccount token, which is never sent"),
        ));
    }
    let data = secret.data.clone().unwrap_or_default();
    let text = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
    };
    match (text("token"), text("username"), text("password")) {
        (Some(token), _, _) => Ok(HttpAuth::Bearer(token)),
        (None, Some(user), password) => Ok(HttpAuth::Basic(user, password)),
        _ => Err(SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!("auth Secret {name} has neither a \"token\" nor a \"username\" key"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: Option<&str>, data: &[(&str, &str)]) -> Secret {
        Secret {
            type_: type_.map(Into::into),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_token_is_bearer_and_a_username_basic() {
        assert_eq!(
            http_auth(&secret(None, &[("token", "t")]), "s").unwrap(),
            HttpAuth::Bearer("t".into())
        );
        assert_eq!(
            http_auth(&secret(None, &[("username", "u"), ("password", "p")]), "s").unwrap(),
            HttpAuth::Basic("u".into(), Some("p".into()))
        );
        assert_eq!(
            http_auth(&secret(None, &[("other", "x")]), "s")
                .unwrap_err()
                .reason,
            reasons::INVALID_CREDENTIALS
        );
    }

    #[test]
    fn service_account_tokens_are_never_credentials() {
        let err = http_auth(
            &secret(
                Some("kubernetes.io/service-account-token"),
                &[("token", "t")],
            ),
            "s",
        )
        .unwrap_err();
        assert!(err.message.contains("is never sent"), "{}", err.message);
    }

    #[test]
    fn credentials_do_not_show_in_debug_output() {
        let shown = format!(
            "{:?} {:?}",
            HttpAuth::Bearer("sekret".into()),
            HttpAuth::Basic("u".into(), Some("sekret".into()))
        );
        assert!(!shown.contains("sekret"), "{shown}");
    }
}
