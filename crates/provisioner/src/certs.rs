//! Serving certificates for the webhooks and APIServices of registry+v1 bundles: who issues
//! them ([`Provider`], chosen by `--cert-provider`), when the provisioner's own change
//! ([`rotation`]), how they are made ([`issue`]), where they are kept ([`store`]) and how they
//! are put into the objects applied ([`inject`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub mod inject;
pub mod issue;
pub mod rotation;
pub mod store;

pub use inject::{Injection, inject};

/// Who issues serving certificates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Provider {
    /// The provisioner, from a CA of its own per BundleDeployment (OLM v0's way; no
    /// dependency).
    #[default]
    Provisioner,
    /// cert-manager (it must be installed): an Issuer and a Certificate per Service.
    CertManager,
    /// OpenShift's service-ca operator: annotations.
    ServiceCa,
}

impl FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "provisioner" => Ok(Provider::Provisioner),
            "cert-manager" => Ok(Provider::CertManager),
            "service-ca" => Ok(Provider::ServiceCa),
            other => Err(format!(
                "{other:?}: expected provisioner, cert-manager or service-ca"
            )),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Provider::Provisioner => "provisioner",
            Provider::CertManager => "cert-manager",
            Provider::ServiceCa => "service-ca",
        })
    }
}

/// The default lifetime of the provisioner's CAs and certificates: two years, as OLM v0's.
pub const LIFETIME: Duration = Duration::from_secs(2 * 365 * 24 * 3600);

/// How a provisioner issues certificates.
#[derive(Clone)]
pub struct Certs {
    /// Who issues them.
    pub provider: Provider,
    /// How long the provisioner's own CAs and certificates live.
    pub lifetime: Duration,
    /// Where the provisioner keeps its own.
    pub stores: store::Stores,
}
