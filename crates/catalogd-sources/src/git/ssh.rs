//! git over ssh, in process: an SSH session (russh) that checks the server's host key against
//! the `ssh-knownhosts` of the opted-in Secret (never trust on first use), authenticates with
//! its `ssh-privatekey`, and runs `git-upload-pack` on the server; gix then speaks the git
//! protocol over that channel as it would over a spawned `ssh`. No ssh binary is needed.

use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gix::protocol::transport::Protocol;
use gix::protocol::transport::client::git::{ConnectMode, blocking_io::Connection};
use russh::client;
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate, decode_secret_key};
use russh::{ChannelMsg, ChannelReadHalf};
use tokio_util::io::SyncIoBridge;

use crate::contract::{SourceError, reasons};

/// The key of a Secret's private key (as in `kubernetes.io/ssh-auth` Secrets).
pub const PRIVATE_KEY: &str = "ssh-privatekey";
/// The key of a Secret's known hosts, in OpenSSH `known_hosts` form.
pub const KNOWN_HOSTS: &str = "ssh-knownhosts";

/// SSH credentials from a Secret.
#[derive(Clone)]
pub struct SshAuth {
    /// The private key, OpenSSH or PEM, without a passphrase.
    pub private_key: String,
    /// `known_hosts` lines for the server.
    pub known_hosts: String,
}

impl std::fmt::Debug for SshAuth {
    // Never print a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SshAuth(…)")
    }
}

/// Where an ssh URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User (`git` when the URL names none).
    pub user: String,
    /// The repository's path on the server, as `git-upload-pack` takes it.
    pub path: String,
}

/// The target of an `ssh://` or `user@host:path` URL.
pub fn target(raw: &str) -> Result<Target, SourceError> {
    let url = raw;
    let invalid = |why: String| SourceError::new(super::spec::INVALID_SPEC, why);
    let url = &super::spec::redact(url);
    let parsed = gix::url::parse(gix::bstr::BStr::new(raw.as_bytes()))
        .map_err(|e| invalid(format!("git.repository {url:?} is not an ssh URL: {e}")))?;
    if parsed.scheme != gix::url::Scheme::Ssh {
        return Err(invalid(format!("git.repository {url:?} is not an ssh URL")));
    }
    let host = parsed
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| invalid(format!("git.repository {url:?} names no host")))?
        .to_owned();
    let path = String::from_utf8(parsed.path.to_vec()).map_err(|_| {
        invalid(format!(
            "git.repository {url:?} has a path that is not UTF-8"
        ))
    })?;
    Ok(Target {
        host,
        port: parsed.port.unwrap_or(22),
        user: parsed.user().unwrap_or("git").to_owned(),
        path,
    })
}

/// `text` quoted for a POSIX shell (the server runs the command through the user's shell).
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The git transport over an SSH channel running `git-upload-pack`.
pub type SshConnection = Connection<SessionReader, SyncIoBridge<ChannelWriter>>;

type ChannelWriter = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// What the server wrote to stderr (its explanation when it refuses), at most this much.
const MAX_STDERR: usize = 4096;

/// The channel's reading half: the data stream for gix, the server's stderr kept aside for
/// messages, every read bounded by the operation's deadline and all of them by a byte limit.
/// It keeps the session alive as long as gix reads.
pub struct SessionReader {
    read: ChannelReadHalf,
    runtime: tokio::runtime::Handle,
    buffer: Vec<u8>,
    position: usize,
    stderr: Arc<Mutex<Vec<u8>>>,
    received: u64,
    limit: u64,
    deadline: tokio::time::Instant,
    timeout: Duration,
    _session: Arc<client::Handle<HostCheck>>,
}

impl Read for SessionReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.position >= self.buffer.len() {
            let next = self
                .runtime
                .block_on(tokio::time::timeout_at(self.deadline, self.read.wait()));
            match next {
                Err(_) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "took longer than {}s (--git-timeout-seconds)",
                            self.timeout.as_secs()
                        ),
                    ));
                }
                Ok(None | Some(ChannelMsg::Eof | ChannelMsg::Close)) => return Ok(0),
                Ok(Some(ChannelMsg::Data { data })) => {
                    self.received += data.len() as u64;
                    if self.received > self.limit {
                        return Err(std::io::Error::other(format!(
                            "the server sent more than {} bytes (--max-content-bytes)",
                            self.limit
                        )));
                    }
                    self.buffer = data.to_vec();
                    self.position = 0;
                }
                Ok(Some(ChannelMsg::ExtendedData { data, .. })) => {
                    let mut stderr = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
                    let room = MAX_STDERR.saturating_sub(stderr.len());
                    stderr.extend_from_slice(&data[..data.len().min(room)]);
                }
                Ok(Some(_)) => {}
            }
        }
        let n = buf.len().min(self.buffer.len() - self.position);
        buf[..n].copy_from_slice(&self.buffer[self.position..self.position + n]);
        self.position += n;
        Ok(n)
    }
}

/// Checks the server's host key against the known hosts, and says why it refused.
pub struct HostCheck {
    host: String,
    port: u16,
    known_hosts: std::path::PathBuf,
    refused: Arc<Mutex<Option<String>>>,
}

impl client::Handler for HostCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(
                "the server offered a host certificate; name its host key in ssh-knownhosts".into(),
            );
            return Ok(false);
        };
        let fingerprint = key.fingerprint(Default::default());
        let verdict =
            russh::keys::check_known_hosts_path(&self.host, self.port, key, &self.known_hosts);
        let refused = match verdict {
            Ok(true) => return Ok(true),
            Ok(false) => format!(
                "the host key of {}:{} ({} {fingerprint}) is not in the ssh-knownhosts of git.authSecret",
                self.host,
                self.port,
                key.algorithm()
            ),
            Err(e) => format!(
                "the host key of {}:{} ({} {fingerprint}) does not match ssh-knownhosts: {e}",
                self.host,
                self.port,
                key.algorithm()
            ),
        };
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(refused);
        Ok(false)
    }
}

/// How one SSH operation is bounded, and where the server's stderr goes.
pub struct Bounds {
    /// The whole operation's time.
    pub timeout: Duration,
    /// The bytes the server may send.
    pub max_bytes: u64,
    /// Receives what the server writes to stderr.
    pub stderr: Arc<Mutex<Vec<u8>>>,
    /// Where it may connect: the host's addresses are resolved through it.
    pub policy: Arc<olm_puller::network::NetworkPolicy>,
}

/// Connects to `target` as `auth` says and starts `git-upload-pack`; `scratch` is a folder
/// for the known hosts file. Blocking: call it on a blocking thread of a tokio runtime.
pub fn connect(
    target: &Target,
    auth: &SshAuth,
    bounds: &Bounds,
    scratch: &Path,
    shown: &str,
) -> Result<SshConnection, SourceError> {
    let timeout = bounds.timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let failed = |why: String| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!("connecting to {shown}: {why}"),
        )
    };
    let key = decode_secret_key(&auth.private_key, None).map_err(|e| {
        SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!(
                "the {PRIVATE_KEY} of git.authSecret is not a private key without a passphrase: {e}"
            ),
        )
    })?;
    let known_hosts = scratch.join("known_hosts");
    std::fs::write(&known_hosts, &auth.known_hosts)
        .map_err(|e| failed(format!("writing the known hosts: {e}")))?;
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| failed(format!("no async runtime: {e}")))?;
    let refused = Arc::new(Mutex::new(None));
    let handler = HostCheck {
        host: target.host.clone(),
        port: target.port,
        known_hosts,
        refused: refused.clone(),
    };
    let config = Arc::new(client::Config {
        inactivity_timeout: Some(timeout),
        ..Default::default()
    });
    let command = format!("git-upload-pack {}", quote(&target.path));
    let session = runtime.block_on(async {
        // Only the addresses the policy allows, resolved once: the connection goes to them.
        let addresses = bounds
            .policy
            .resolve(&target.host, target.port)
            .await
            .map_err(|r| SourceError::new(reasons::HOST_NOT_ALLOWED, format!("{shown}: {r}")))?;
        let connecting = client::connect(config, &addresses[..], handler);
        let mut session =
            match tokio::time::timeout(timeout.min(Duration::from_secs(30)), connecting).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let why = refused
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    return Err(match why {
                        Some(why) => {
                            SourceError::new(reasons::UNAUTHORIZED, format!("{shown}: {why}"))
                        }
                        None => failed(e.to_string()),
                    });
                }
                Err(_) => {
                    return Err(failed(format!(
                        "no answer within {}s",
                        timeout.min(Duration::from_secs(30)).as_secs()
                    )));
                }
            };
        let hash = session
            .best_supported_rsa_hash()
            .await
            .map_err(|e| failed(e.to_string()))?
            .flatten();
        let accepted = session
            .authenticate_publickey(
                target.user.clone(),
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !accepted.success() {
            return Err(SourceError::new(
                reasons::UNAUTHORIZED,
                format!(
                    "{shown}: the server refused the {PRIVATE_KEY} of git.authSecret for user {:?}",
                    target.user
                ),
            ));
        }
        let channel = session
            .channel_open_session()
            .await
            .map_err(|e| failed(e.to_string()))?;
        // Protocol version 2, when the server accepts the variable (sshd's AcceptEnv).
        let _ = channel.set_env(false, "GIT_PROTOCOL", "version=2").await;
        channel
            .exec(true, command.as_bytes())
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok((session, channel.split()))
    })?;
    let (session, (read, write)) = session;
    let writer: ChannelWriter = Box::pin(write.make_writer());
    let reader = SessionReader {
        read,
        runtime: runtime.clone(),
        buffer: Vec::new(),
        position: 0,
        stderr: bounds.stderr.clone(),
        received: 0,
        limit: bounds.max_bytes,
        deadline,
        timeout,
        _session: Arc::new(session),
    };
    let writer = SyncIoBridge::new_with_handle(writer, runtime);
    Ok(Connection::new(
        reader,
        writer,
        Protocol::V2,
        target.path.clone(),
        None::<(String, Option<u16>)>,
        ConnectMode::Process,
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_urls_name_host_port_user_and_path() {
        assert_eq!(
            target("ssh://git@example.com:2222/org/repo.git").unwrap(),
            Target {
                host: "example.com".into(),
                port: 2222,
                user: "git".into(),
                path: "/org/repo.git".into(),
            }
        );
        let scp = target("deploy@example.com:org/repo.git").unwrap();
        assert_eq!(
            (scp.user.as_str(), scp.port, scp.path.as_str()),
            ("deploy", 22, "org/repo.git")
        );
        assert_eq!(target("ssh://example.com/r.git").unwrap().user, "git");
        assert!(target("https://example.com/r.git").is_err());
    }

    #[test]
    fn paths_are_quoted_for_the_remote_shell() {
        assert_eq!(quote("/srv/repo.git"), "'/srv/repo.git'");
        assert_eq!(quote("/srv/it's; rm -rf /"), r"'/srv/it'\''s; rm -rf /'");
    }
}
