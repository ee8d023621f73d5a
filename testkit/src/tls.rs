//! The harness's CA: one per test process, made with openssl in a temporary folder. Test servers
//! (HTTPS file servers, the secure registry) get certificates for 127.0.0.1 from it, and the
//! harness's catalogd trusts it for registries (`--registry-ca-file`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{Error, Result};

/// The harness's CA.
#[derive(Debug, Clone)]
pub struct Ca {
    dir: PathBuf,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A server certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
}

static CA: OnceLock<std::result::Result<Ca, String>> = OnceLock::new();

/// The CA of this test process, made on first use (removed when the process exits).
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
        self.issue_for(dir, "IP:127.0.0.1")
    }

    /// A certificate for the subject alternative names `sans` (openssl's syntax, e.g.
    /// `DNS:catalogd.test,IP:127.0.0.1`), written to `dir` as `server.crt` and `server.key`.
    pub fn issue_for(&self, dir: &Path, sans: &str) -> Result<Issued> {
        mkdir(dir)?;
        let ext = dir.join("server.ext");
        std::fs::write(
            &ext,
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName={sans}\n"),
        )
        .map_err(|source| Error::Io {
            path: ext.display().to_string(),
            source,
        })?;
        let ca_cert = self.dir.join("ca.crt").display().to_string();
        let ca_key = self.dir.join("ca.key").display().to_string();
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        )?;
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                &ca_cert,
                "-CAkey",
                &ca_key,
                "-set_serial",
                &serial(),
                "-days",
                "1",
                "-sha256",
                "-extfile",
                "server.ext",
                "-out",
                "server.crt",
            ],
        )?;
        Ok(Issued {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        })
    }
}

fn make_ca() -> Result<Ca> {
    // Not in the run's folder: that would start a control plane, and tests of a git or
    // registry server alone need none.
    let dir = std::env::temp_dir().join(format!("olm-e2e-ca-{}", std::process::id()));
    mkdir(&dir)?;
    crate::process::remove_on_exit(&dir)?;
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=olm-rs-e2e-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    )?;
    let pem = std::fs::read_to_string(dir.join("ca.crt")).map_err(|source| Error::Io {
        path: dir.join("ca.crt").display().to_string(),
        source,
    })?;
    Ok(Ca { dir, pem })
}

/// A serial number unique within this process's CA.
fn serial() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn mkdir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| Error::Fixture(format!("running openssl: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Fixture(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}
