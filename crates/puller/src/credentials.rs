//! Secrets used as credentials.
//!
//! A Secret is a credential only when it opted in with [`CREDENTIAL_LABEL`]: whoever may create
//! a Catalog (a BundleDeployment) can name any Secret of the manager's namespace, and without
//! the label that would let them send it to a server of their choosing. Secrets are looked up
//! with the label as a selector, so one that did not opt in is never even read (only its
//! metadata, to say why it is not used).

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};

use crate::error::{Error, ErrorKind};

/// The label a Secret carries, with the value `"true"`, to be usable as a catalog credential.
pub const CREDENTIAL_LABEL: &str = "olm-rs.io/catalog-credential";

/// The label selector of credential Secrets (also what the managers watch).
pub fn credential_selector() -> String {
    format!("{CREDENTIAL_LABEL}=true")
}

/// The Secret `namespace/name`, if it opted in as a credential. `what` names its use in
/// messages ("auth Secret", "pull secret").
pub async fn opted_in_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
) -> Result<Secret, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let lookup = ListParams::default()
        .labels(&credential_selector())
        .fields(&format!("metadata.name={name}"));
    let failed = |e: kube::Error| {
        Error::new(
            ErrorKind::Failed,
            format!("reading {what} {namespace}/{name}: {e}"),
        )
    };
    if let Some(secret) = api
        .list(&lookup)
        .await
        .map_err(failed)?
        .items
        .into_iter()
        .next()
    {
        return Ok(secret);
    }
    // Not a credential: say whether it exists at all, from its metadata alone.
    match api.get_metadata_opt(name).await.map_err(failed)? {
        Some(_) => Err(Error::new(
            ErrorKind::SecretNotOptedIn,
            format!(
                "{what} {namespace}/{name} is not labelled {CREDENTIAL_LABEL}=true, so it is not used as a credential and nothing was sent; label it to opt in: kubectl label secret -n {namespace} {name} {CREDENTIAL_LABEL}=true"
            ),
        )),
        None => Err(Error::new(
            ErrorKind::InvalidCredentials,
            format!("{what} {namespace}/{name} not found"),
        )),
    }
}
