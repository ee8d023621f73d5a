//! A real OCI registry for tests: the distribution registry (Debian's `docker-registry`),
//! started on 127.0.0.1 on a free port with its own storage folder, plainly or with htpasswd
//! authentication and TLS (a certificate from the harness CA). It is tethered to the test
//! process like every other process of the harness, and its access log tells tests exactly
//! which requests it served.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Error, Result};

/// The plain registry of this test process, started on first use and shared by its tests
/// (each uses repositories of its own).
pub fn plain() -> Result<&'static Registry> {
    static PLAIN: std::sync::OnceLock<std::result::Result<Registry, String>> =
        std::sync::OnceLock::new();
    PLAIN
        .get_or_init(|| Registry::start("plain", None).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Fixture(e.clone()))
}

/// The registry binary (Debian's docker-registry package).
pub const BINARY: &str = "docker-registry";

/// Credentials of a secured registry.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

/// A running registry.
#[derive(Debug, Clone)]
pub struct Registry {
    /// `127.0.0.1:port`, as image references name it.
    pub host: String,
    /// Its folder (config, storage, log).
    pub dir: PathBuf,
    /// The credentials it requires, when secured (it then speaks only TLS).
    pub credentials: Option<Credentials>,
    /// The process, when this process started it.
    child: Option<crate::process::Kept>,
}

impl Registry {
    /// A plain registry another process runs at `host` with its folder `dir` (the local
    /// cluster's node registry): pushed to and read like one this process started, never
    /// stopped by it.
    pub fn running(host: &str, dir: &Path) -> Registry {
        Registry {
            host: host.to_owned(),
            dir: dir.to_path_buf(),
            credentials: None,
            child: None,
        }
    }

    /// Starts a registry named `name` (its folder in this process's scratch folder, removed
    /// when it exits); secured with TLS and htpasswd when `credentials` are given.
    pub fn start(name: &str, credentials: Option<Credentials>) -> Result<Registry> {
        let dir = crate::scratch_dir()?.join("registries").join(name);
        Registry::start_in(&dir, credentials)
    }

    /// Starts a registry in `dir` (emptied first, removed when this process exits); secured
    /// as [`Registry::start`] says.
    pub fn start_in(dir: &Path, credentials: Option<Credentials>) -> Result<Registry> {
        let binary = crate::process::which(BINARY).ok_or_else(|| {
            Error::Fixture(format!(
                "{BINARY} is not installed; hack/test.sh installs it (Debian package docker-registry)"
            ))
        })?;
        let dir = dir.to_path_buf();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("storage")).map_err(io(&dir))?;
        crate::process::remove_on_exit(&dir)?;
        let port = crate::free_port()?;
        let host = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n",
            dir.join("storage").display()
        );
        if let Some(c) = &credentials {
            let issued = crate::tls::ca()?.issue(&dir.join("tls"))?;
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: olm-rs-e2e\n    path: {}\n",
                issued.cert.display(),
                issued.key.display(),
                dir.join("htpasswd").display()
            ));
            let hash = bcrypt::hash(&c.password, 5)
                .map_err(|e| Error::Fixture(format!("hashing the registry password: {e}")))?;
            std::fs::write(dir.join("htpasswd"), format!("{}:{hash}\n", c.user))
                .map_err(io(&dir))?;
        }
        let config_file = dir.join("config.yml");
        std::fs::write(&config_file, config).map_err(io(&config_file))?;
        let log = dir.join("registry.log");
        let out = std::fs::File::create(&log).map_err(io(&log))?;
        let err = out.try_clone().map_err(io(&log))?;
        let child = crate::process::spawn_tethered(
            &binary,
            &["serve".to_owned(), config_file.display().to_string()],
            |c| {
                c.stdin(Stdio::null()).stdout(out).stderr(err);
            },
        )?;
        let registry = Registry {
            host,
            dir,
            credentials,
            child: Some(Arc::new(Mutex::new(child))),
        };
        registry.wait_ready()?;
        Ok(registry)
    }

    /// The registry's URL scheme.
    pub fn scheme(&self) -> &'static str {
        if self.credentials.is_some() {
            "https"
        } else {
            "http"
        }
    }

    fn wait_ready(&self) -> Result<()> {
        let url = format!("{}://{}/v2/", self.scheme(), self.host);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            // 200, or 401 when secured, means it serves.
            if matches!(crate::probe::status(&url), Some(200 | 401)) {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Fixture(format!(
                    "registry {} did not answer within 30 s; its log: {}",
                    self.host,
                    self.log()
                )));
            }
            // Polling a starting process's port, bounded by the deadline.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its log, access log included.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    /// The access log's request lines (`METHOD /path`) of clients whose user agent contains
    /// `agent`, in order.
    pub fn requests(&self, agent: &str) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains(agent))
            .filter_map(|l| {
                // Combined log format: ... "METHOD /path HTTP/1.1" status size "referer" "agent"
                let request = l.split('"').nth(1)?;
                let mut parts = request.split(' ');
                Some(format!("{} {}", parts.next()?, parts.next()?))
            })
            .collect()
    }

    /// Where the registry keeps the blob `digest` (`sha256:...`), to corrupt it on purpose.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2.min(hex.len())])
            .join(hex)
            .join("data")
    }

    /// Stops it (when this process started it).
    pub fn stop(&self) -> Result<()> {
        match &self.child {
            Some(child) => crate::process::stop(child, Duration::from_secs(5)),
            None => Ok(()),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}
