//! A real SSH server for git over ssh: OpenSSH's `sshd` (Debian's openssh-server) on
//! 127.0.0.1, with a host key and an authorized client key made for the run, serving the
//! repositories of a [`crate::git::GitServer`] through the `git-upload-pack` of the machine's
//! git. It runs as the test's own user (as root it needs `/run/sshd`, which it creates) and is
//! tethered to the test process.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Error, Result};

/// A running sshd.
pub struct SshServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The user to log in as (the test's own).
    pub user: String,
    /// A private key the server accepts (OpenSSH format).
    pub private_key: String,
    /// A private key the server does not accept.
    pub stranger_key: String,
    /// The `known_hosts` line of the server's host key.
    pub known_hosts: String,
    /// A `known_hosts` line naming this server with another key.
    pub wrong_known_hosts: String,
    child: std::process::Child,
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn keygen(dir: &Path, name: &str) -> Result<(String, String)> {
    let path = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&path)
        .output()
        .map_err(|e| Error::Fixture(format!("running ssh-keygen: {e}")))?;
    if !out.status.success() {
        return Err(Error::Fixture(format!(
            "ssh-keygen: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let private = std::fs::read_to_string(&path).map_err(io(&path))?;
    let public_path = path.with_extension("pub");
    let public = std::fs::read_to_string(&public_path).map_err(io(&public_path))?;
    Ok((private, public.trim().to_owned()))
}

impl SshServer {
    /// Starts sshd with its files in `dir` (created).
    pub fn start(dir: &Path) -> Result<SshServer> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let sshd = PathBuf::from("/usr/sbin/sshd");
        if !sshd.exists() {
            return Err(Error::Fixture(
                "sshd is missing: install openssh-server (hack/prereqs.sh does)".into(),
            ));
        }
        let (_, host_public) = keygen(dir, "host_key")?;
        let (private_key, client_public) = keygen(dir, "client_key")?;
        let (stranger_key, _) = keygen(dir, "stranger_key")?;
        let (_, other_host) = keygen(dir, "other_host_key")?;
        let authorized = dir.join("authorized_keys");
        std::fs::write(&authorized, format!("{client_public}\n")).map_err(io(&authorized))?;
        let port = crate::free_port()?;
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {authorized}\nPidFile {pid}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nAcceptEnv GIT_PROTOCOL\nLogLevel VERBOSE\n",
                host = dir.join("host_key").display(),
                authorized = authorized.display(),
                pid = dir.join("sshd.pid").display(),
            ),
        )
        .map_err(io(&config))?;
        // Debian's sshd, as root, insists on its privilege separation folder.
        if is_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let log = dir.join("sshd.log");
        let file = std::fs::File::create(&log).map_err(io(&log))?;
        let err = file.try_clone().map_err(io(&log))?;
        let child = crate::process::spawn_tethered(
            &sshd,
            &[
                "-D".into(),
                "-e".into(),
                "-f".into(),
                config.display().to_string(),
            ],
            |c| {
                c.stdin(Stdio::null()).stdout(file).stderr(err);
            },
        )?;
        // Ready once it accepts connections.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if std::time::Instant::now() > deadline {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(Error::Fixture(format!("sshd did not start: {text}")));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let key = |public: &str| public.split(' ').take(2).collect::<Vec<_>>().join(" ");
        Ok(SshServer {
            port,
            user: user(),
            private_key,
            stranger_key,
            known_hosts: format!("[127.0.0.1]:{port} {}\n", key(&host_public)),
            wrong_known_hosts: format!("[127.0.0.1]:{port} {}\n", key(&other_host)),
            child,
        })
    }

    /// The ssh URL of the bare repository at `path` (absolute).
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn user() -> String {
    std::process::Command::new("id")
        .arg("-un")
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "root".into())
}
