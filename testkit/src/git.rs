//! A real git server for tests: git's own smart HTTP backend (`git http-backend`, from Debian's
//! git) behind a small HTTP server on 127.0.0.1 that runs it as CGI, with repositories the
//! tests create and change through the `git` command. Repositories under `private/` need
//! basic credentials. Every request is recorded, so tests can count round trips. The server
//! runs on the test's tokio runtime: a test that runs git itself (blocking) needs a
//! multi-threaded one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncWriteExt;

use crate::{Error, Result};

/// Basic credentials the server requires for `private/` repositories.
#[derive(Debug, Clone)]
pub struct GitCredentials {
    /// User name.
    pub user: String,
    /// Password (or token).
    pub password: String,
}

/// A running git server.
#[derive(Clone)]
pub struct GitServer {
    /// `http://127.0.0.1:PORT`; a repository `NAME` is at `<url>/NAME.git`.
    pub url: String,
    /// The same repositories over HTTPS, with a certificate of the harness CA.
    pub https_url: String,
    /// Where the bare repositories are.
    pub root: PathBuf,
    state: Arc<ServerState>,
}

struct ServerState {
    root: PathBuf,
    credentials: Option<GitCredentials>,
    requests: Mutex<Vec<String>>,
}

impl GitServer {
    /// Starts a server for the repositories under `root` (created), requiring `credentials`
    /// for `private/` ones.
    pub async fn start(root: &Path, credentials: Option<GitCredentials>) -> Result<GitServer> {
        std::fs::create_dir_all(root).map_err(|source| Error::Io {
            path: root.display().to_string(),
            source,
        })?;
        let state = Arc::new(ServerState {
            root: root.to_path_buf(),
            credentials,
            requests: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::Fixture(format!("binding the git server: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Fixture(e.to_string()))?;
        let (tls, tls_addr) = crate::serve::tls_listener(&root.join(".tls")).await?;
        let plain = app.clone();
        tokio::spawn(async move { axum::serve(listener, plain).await });
        tokio::spawn(async move { axum::serve(tls, app).await });
        Ok(GitServer {
            url: format!("http://{addr}"),
            https_url: format!("https://{tls_addr}"),
            root: root.to_path_buf(),
            state,
        })
    }

    /// The requests served so far (`METHOD /path?query`), in order.
    pub fn requests(&self) -> Vec<String> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The URL of repository `name`.
    pub fn repo_url(&self, name: &str) -> String {
        format!("{}/{name}.git", self.url)
    }

    /// The HTTPS URL of repository `name` (trust [`crate::tls::ca`]).
    pub fn https_repo_url(&self, name: &str) -> String {
        format!("{}/{name}.git", self.https_url)
    }

    /// Creates the bare repository `name` and a working copy to change it through.
    pub fn create(&self, name: &str) -> Result<Repo> {
        let bare = self.root.join(format!("{name}.git"));
        let work = self.root.join(".work").join(name);
        let _ = std::fs::remove_dir_all(&bare);
        let _ = std::fs::remove_dir_all(&work);
        git(
            &self.root,
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                &bare.display().to_string(),
            ],
        )?;
        git(
            &self.root,
            &["init", "-q", "-b", "main", &work.display().to_string()],
        )?;
        git(
            &work,
            &["remote", "add", "origin", &bare.display().to_string()],
        )?;
        Ok(Repo { work })
    }
}

/// A repository's working copy; each change is pushed to the served bare repository.
#[derive(Debug, Clone)]
pub struct Repo {
    work: PathBuf,
}

impl Repo {
    /// Writes a file of `size` zero bytes at `path` of the work tree, sparse (no disk, no
    /// memory): the next [`Self::commit`] adds it. git streams such a file into a blob that
    /// compresses about a thousandfold.
    pub fn write_zeros(&self, path: &str, size: u64) -> Result<()> {
        let file = self.work.join(path);
        let io = |source| Error::Io {
            path: file.display().to_string(),
            source,
        };
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(size))
            .map_err(io)
    }

    /// Writes `files` (path, content) on `branch` (created from the current one if new),
    /// commits and pushes; returns the commit id.
    pub fn commit(&self, branch: &str, files: &[(&str, &str)], message: &str) -> Result<String> {
        let _ = git(&self.work, &["checkout", "-q", "-B", branch]);
        for (path, content) in files {
            let file = self.work.join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                    path: parent.display().to_string(),
                    source,
                })?;
            }
            std::fs::write(&file, content).map_err(|source| Error::Io {
                path: file.display().to_string(),
                source,
            })?;
        }
        git(&self.work, &["add", "-A"])?;
        git(
            &self.work,
            &[
                "-c",
                "user.name=olm-e2e",
                "-c",
                "user.email=e2e@olm-rs.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                message,
            ],
        )?;
        git(&self.work, &["push", "-q", "-f", "origin", branch])?;
        self.head()
    }

    /// Tags the current commit `tag` and pushes the tag.
    pub fn tag(&self, tag: &str) -> Result<()> {
        git(&self.work, &["tag", "-f", tag])?;
        git(
            &self.work,
            &["push", "-q", "-f", "origin", &format!("refs/tags/{tag}")],
        )?;
        Ok(())
    }

    /// Tags the current commit with an annotated tag `tag` and pushes it.
    pub fn annotated_tag(&self, tag: &str, message: &str) -> Result<()> {
        git(
            &self.work,
            &[
                "-c",
                "user.name=olm-e2e",
                "-c",
                "user.email=e2e@olm-rs.invalid",
                "tag",
                "-f",
                "-a",
                "-m",
                message,
                tag,
            ],
        )?;
        git(
            &self.work,
            &["push", "-q", "-f", "origin", &format!("refs/tags/{tag}")],
        )?;
        Ok(())
    }

    /// The working copy (to add files git cannot get from [`Repo::commit`], like symlinks).
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// The current commit id.
    pub fn head(&self) -> Result<String> {
        git(&self.work, &["rev-parse", "HEAD"]).map(|out| out.trim().to_owned())
    }
}

/// Runs `git args` in `dir`; its standard output.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .map_err(|e| Error::Fixture(format!("running git: {e}")))?;
    if !out.status.success() {
        return Err(Error::Fixture(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One request: checked for credentials, then handed to `git http-backend` as CGI.
async fn handle(
    State(state): State<Arc<ServerState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query = uri.query().unwrap_or_default().to_owned();
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(if query.is_empty() {
            format!("{method} {path}")
        } else {
            format!("{method} {path}?{query}")
        });
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut user = String::new();
    if path.starts_with("/private/")
        && let Some(expected) = &state.credentials
    {
        use base64::Engine as _;
        let given = header("authorization")
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok());
        if given.as_deref() != Some(format!("{}:{}", expected.user, expected.password).as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                [("www-authenticate", "Basic realm=\"olm-e2e-git\"")],
                "authentication required",
            )
                .into_response();
        }
        user = expected.user.clone();
    }
    let mut command = tokio::process::Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", &query)
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        // Protocol v2 (ls-refs) is asked for with this header.
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Ok(mut child) = command.spawn() else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot run git http-backend",
        )
            .into_response();
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&body).await;
    }
    let Ok(out) = child.wait_with_output().await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "git http-backend failed").into_response();
    };
    cgi_response(&out.stdout)
}

/// A CGI answer (headers, a blank line, the body) as an HTTP response.
fn cgi_response(out: &[u8]) -> Response {
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, skip)) = split else {
        return (StatusCode::BAD_GATEWAY, "no CGI headers").into_response();
    };
    let mut status = StatusCode::OK;
    let mut builder = Response::builder();
    for line in String::from_utf8_lossy(&out[..end]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::OK);
        } else {
            builder = builder.header(name, value);
        }
    }
    builder
        .status(status)
        .body(axum::body::Body::from(out[end + skip..].to_vec()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
