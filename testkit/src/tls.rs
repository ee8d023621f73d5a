//! The harness's CA: one per test process, made with rcgen ([`crate::pki`]) and written to a
//! temporary folder. Test servers (HTTPS file servers, the secure registry, catalogd's content
//! server, the managers' metrics) get certificates from it, and the harness's catalogd trusts
//! it for registries (`--registry-ca-file`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::pki::Authority;
use crate::{Error, Result};

/// The harness's CA.
#[derive(Debug)]
pub struct Ca {
    dir: PathBuf,
    authority: Authority,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A server certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8).
    pub key: PathBuf,
}

static CA: OnceLock<std::result::Result<Ca, String>> = OnceLock::new();

/// The CA of this test process, made on first use (its folder removed when the process exits).
pub fn ca() -> Result<&'static Ca> {
    CA.get_or_init(|| make_ca().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Fixture(e.clone()))
}

impl Ca {
    /// The CA certificate's file.
    pub fn cert_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A certificate for 127.0.0.1, written to `dir` as `server.crt` and `server.key`.
    pub fn issue(&self, dir: &Path) -> Result<Issued> {
        self.issue_for(dir, &["127.0.0.1"])
    }

    /// A serving certificate for `names` (DNS names or IP addresses, e.g.
    /// `["catalogd.test", "127.0.0.1"]`), written to `dir` as `server.crt` and `server.key`.
    pub fn issue_for(&self, dir: &Path, names: &[&str]) -> Result<Issued> {
        mkdir(dir)?;
        let pair = self.authority.server(names)?;
        let issued = Issued {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        };
        write(&issued.cert, &pair.cert)?;
        write(&issued.key, &pair.key)?;
        Ok(issued)
    }
}

fn make_ca() -> Result<Ca> {
    // Not in the run's folder: that would start a control plane, and tests of a git or
    // registry server alone need none.
    let dir = std::env::temp_dir().join(format!("olm-e2e-ca-{}", std::process::id()));
    mkdir(&dir)?;
    crate::process::remove_on_exit(&dir)?;
    let authority = Authority::new("olm-rs-e2e-ca")?;
    let pem = authority.pem().to_owned();
    write(&dir.join("ca.crt"), &pem)?;
    Ok(Ca {
        dir,
        authority,
        pem,
    })
}

fn mkdir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })
}

fn write(path: &Path, pem: &str) -> Result<()> {
    std::fs::write(path, pem).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}
