//! Who is asking: a user the API server vouches for, either in front-proxy headers
//! (`X-Remote-User` and friends) on a connection made with a client certificate signed by
//! the request-header CA, as the API server's aggregator makes them, or with a bearer token
//! the API server accepts (TokenReview). The request-header settings come from the
//! `extension-apiserver-authentication` ConfigMap in `kube-system`, as every aggregated API
//! server reads them.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use percent_encoding::percent_decode_str;

/// The ConfigMap the API server publishes its authentication settings in.
pub const CONFIG_MAP: &str = "extension-apiserver-authentication";
/// Its namespace.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-system";

/// A user the API server vouches for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid, when known.
    pub uid: Option<String>,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, credential ids …), passed on to authorization.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The front proxy's settings (the `requestheader-*` keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeader {
    /// PEM of the CA that signs the front proxy's client certificate.
    pub ca: String,
    /// Common names that certificate may have (any, when empty).
    pub allowed_names: Vec<String>,
    /// Headers naming the user (the first present wins).
    pub username_headers: Vec<String>,
    /// Headers naming the uid.
    pub uid_headers: Vec<String>,
    /// Headers naming groups (every value of each).
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extra attributes.
    pub extra_prefixes: Vec<String>,
}

impl RequestHeader {
    /// Reads the ConfigMap's data; `None` when the API server has no front proxy configured.
    ///
    /// # Errors
    ///
    /// When a list is not the JSON array the API server writes.
    pub fn from_config_map(data: &BTreeMap<String, String>) -> Result<Option<Self>, String> {
        let Some(ca) = data
            .get("requestheader-client-ca-file")
            .filter(|s| !s.trim().is_empty())
        else {
            return Ok(None);
        };
        let list = |key: &str| -> Result<Vec<String>, String> {
            match data.get(key) {
                None => Ok(Vec::new()),
                Some(text) if text.trim().is_empty() => Ok(Vec::new()),
                Some(text) => serde_json::from_str(text)
                    .map_err(|e| format!("{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP} {key}: {e}")),
            }
        };
        Ok(Some(Self {
            ca: ca.clone(),
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_prefixes: list("requestheader-extra-headers-prefix")?,
        }))
    }

    /// Whether a verified client certificate with common name `cn` is the front proxy's.
    pub fn allows(&self, cn: Option<&str>) -> bool {
        self.allowed_names.is_empty()
            || cn.is_some_and(|cn| self.allowed_names.iter().any(|n| n == cn))
    }

    /// The user the headers name, if they name one.
    pub fn user(&self, headers: &HeaderMap) -> Option<User> {
        let first = |names: &[String]| {
            names.iter().find_map(|n| {
                headers
                    .get(n.as_str())
                    .and_then(|v| v.to_str().ok())
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            })
        };
        let name = first(&self.username_headers)?;
        let uid = first(&self.uid_headers);
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let lower = header.as_str();
            let Some(key) = self.extra_prefixes.iter().find_map(|p| {
                lower
                    .strip_prefix(p.to_ascii_lowercase().as_str())
                    .filter(|k| !k.is_empty())
            }) else {
                continue;
            };
            let key = percent_decode_str(key).decode_utf8_lossy().to_lowercase();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_owned());
            }
        }
        Some(User {
            name,
            uid,
            groups,
            extra,
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn config() -> RequestHeader {
        // As kube-apiserver writes them (--requestheader-* flags).
        let data = BTreeMap::from([
            ("requestheader-client-ca-file".to_owned(), "PEM".to_owned()),
            (
                "requestheader-allowed-names".to_owned(),
                r#"["front-proxy-client"]"#.to_owned(),
            ),
            (
                "requestheader-username-headers".to_owned(),
                r#"["X-Remote-User"]"#.to_owned(),
            ),
            (
                "requestheader-group-headers".to_owned(),
                r#"["X-Remote-Group"]"#.to_owned(),
            ),
            (
                "requestheader-extra-headers-prefix".to_owned(),
                r#"["X-Remote-Extra-"]"#.to_owned(),
            ),
        ]);
        RequestHeader::from_config_map(&data).unwrap().unwrap()
    }

    #[test]
    fn the_front_proxy_s_headers_name_the_user() {
        let cfg = config();
        let mut headers = HeaderMap::new();
        headers.insert("x-remote-user", HeaderValue::from_static("alice"));
        headers.append("x-remote-group", HeaderValue::from_static("dev"));
        headers.append(
            "x-remote-group",
            HeaderValue::from_static("system:authenticated"),
        );
        headers.insert(
            "x-remote-extra-authentication.kubernetes.io%2fcredential-id",
            HeaderValue::from_static("JTI=1"),
        );
        let user = cfg.user(&headers).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["dev", "system:authenticated"]);
        assert_eq!(
            user.extra["authentication.kubernetes.io/credential-id"],
            ["JTI=1"]
        );
        assert!(cfg.allows(Some("front-proxy-client")));
        assert!(!cfg.allows(Some("someone-else")));
        assert!(!cfg.allows(None));
        assert_eq!(cfg.user(&HeaderMap::new()), None);
    }

    #[test]
    fn no_front_proxy_configured() {
        assert_eq!(RequestHeader::from_config_map(&BTreeMap::new()), Ok(None));
        let bad = BTreeMap::from([
            ("requestheader-client-ca-file".to_owned(), "PEM".to_owned()),
            ("requestheader-allowed-names".to_owned(), "nope".to_owned()),
        ]);
        assert!(RequestHeader::from_config_map(&bad).is_err());
    }

    #[test]
    fn bearer_tokens() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer abc"));
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert("authorization", HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
    }
}
