//! Registry credentials from a `kubernetes.io/dockerconfigjson` pull secret, chosen for the
//! registry of the image as the kubelet chooses them.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::error::{Error, ErrorKind};

/// The Secret type of pull secrets.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
const KEY: &str = ".dockerconfigjson";

#[derive(Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The credentials `secret` (named `name` in messages) holds for `registry`, or `Anonymous`
/// when it has none for it. Messages never carry a credential.
pub fn registry_auth(secret: &Secret, name: &str, registry: &str) -> Result<RegistryAuth, Error> {
    let invalid = |why: String| {
        Error::new(
            ErrorKind::InvalidCredentials,
            format!("pull secret {name} {why}"),
        )
    };
    if secret.type_.as_deref() != Some(DOCKER_CONFIG_JSON) {
        return Err(invalid(format!(
            "has type {:?}; a pull secret must be of type {DOCKER_CONFIG_JSON}",
            secret.type_.as_deref().unwrap_or("")
        )));
    }
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .ok_or_else(|| invalid(format!("has no {KEY} key")))?;
    let config: DockerConfig = serde_json::from_slice(&data.0).map_err(|e| {
        invalid(format!(
            "holds {KEY} that is not a docker config: {}",
            e.classify_msg()
        ))
    })?;
    let Some(entry) = config
        .auths
        .iter()
        .find(|(key, _)| matches(key, registry))
        .map(|(_, e)| e)
    else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let encoded = entry
        .auth
        .as_deref()
        .ok_or_else(|| invalid(format!("has an entry for {registry} without credentials")))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            invalid(format!(
                "has an entry for {registry} whose auth is not base64 of user:password"
            ))
        })?;
    let (user, password) = decoded.split_once(':').ok_or_else(|| {
        invalid(format!(
            "has an entry for {registry} whose auth is not user:password"
        ))
    })?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

/// Whether the `auths` key `key` (a host, `host:port`, or a URL such as
/// `https://index.docker.io/v1/`) names `registry`.
fn matches(key: &str, registry: &str) -> bool {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    let hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    host.eq_ignore_ascii_case(registry) || (hub(host) && hub(registry))
}

/// serde_json's message without the input it quotes (which could be a credential).
trait Classify {
    fn classify_msg(&self) -> String;
}

impl Classify for serde_json::Error {
    fn classify_msg(&self) -> String {
        format!(
            "{:?} error at line {} column {}",
            self.classify(),
            self.line(),
            self.column()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, json: &str) -> Secret {
        Secret {
            type_: Some(type_.into()),
            data: Some([(KEY.to_owned(), ByteString(json.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    fn basic(auth: &RegistryAuth) -> Option<(String, String)> {
        match auth {
            RegistryAuth::Basic(u, p) => Some((u.clone(), p.clone())),
            _ => None,
        }
    }

    #[test]
    fn the_entry_for_the_registry_is_used() {
        // "alice:s3cret"
        let s = secret(
            DOCKER_CONFIG_JSON,
            r#"{"auths":{"other.io":{"auth":"eDp5"},"https://127.0.0.1:5001/v1/":{"auth":"YWxpY2U6czNjcmV0"}}}"#,
        );
        let auth = registry_auth(&s, "ps", "127.0.0.1:5001").unwrap();
        assert_eq!(basic(&auth), Some(("alice".into(), "s3cret".into())));
        let none = registry_auth(&s, "ps", "quay.io").unwrap();
        assert!(matches!(none, RegistryAuth::Anonymous));
    }

    #[test]
    fn username_and_password_fields_work_and_docker_hub_has_aliases() {
        let s = secret(
            DOCKER_CONFIG_JSON,
            r#"{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}"#,
        );
        let auth = registry_auth(&s, "ps", "docker.io").unwrap();
        assert_eq!(basic(&auth), Some(("u".into(), "p".into())));
    }

    #[test]
    fn malformed_secrets_are_explained_without_their_content() {
        for (s, why) in [
            (secret("Opaque", "{}"), "must be of type"),
            (
                secret(DOCKER_CONFIG_JSON, r#"{"auths": "s3cret"#),
                "not a docker config",
            ),
            (
                secret(
                    DOCKER_CONFIG_JSON,
                    r#"{"auths":{"r.io":{"auth":"!!s3cret"}}}"#,
                ),
                "not base64",
            ),
            (
                secret(
                    DOCKER_CONFIG_JSON,
                    r#"{"auths":{"r.io":{"auth":"czNjcmV0"}}}"#,
                ),
                "not user:password",
            ),
        ] {
            let err = registry_auth(&s, "ps", "r.io").unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidCredentials);
            assert!(err.message.contains(why), "{why}: {}", err.message);
            assert!(!err.message.contains("s3cret"), "{}", err.message);
        }
    }
}
