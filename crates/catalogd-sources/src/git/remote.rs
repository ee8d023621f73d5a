//! The network half of the git source, with gix (blocking: run it on a blocking thread): ask
//! the remote where a ref points (the handshake and one `ls-refs`), and fetch exactly one
//! commit, shallow, into a scratch bare repository whose objects are then read in place.
//!
//! gix reads no git configuration of the host (an isolated repository), asks no credential
//! helper and prompts no one: the only credentials are the ones given here, and gix itself
//! refuses to send them over plain HTTP.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::protocol::transport::client::blocking_io::http;
use gix::remote::Direction;
use gix::sec::identity::Account;

use super::bounded::{BoundedHttp, Budget};
use super::spec::Want;
use super::tree::{Item, Kind, Objects};
use crate::contract::{SourceError, reasons};
use olm_puller::network::NetworkPolicy;

/// Where and how to reach a repository.
#[derive(Clone)]
pub struct Remote {
    /// The clone URL.
    pub url: String,
    /// Basic credentials, if any (https).
    pub account: Option<(String, String)>,
    /// SSH credentials (ssh URLs).
    pub ssh: Option<super::ssh::SshAuth>,
    /// Extra trusted CAs (https).
    pub ca: Vec<reqwest::Certificate>,
    /// The most a whole operation may take.
    pub timeout: Duration,
    /// How messages name the repository (the URL without a password).
    pub shown: String,
    /// Where the fetch may connect.
    pub policy: Arc<NetworkPolicy>,
}

impl Remote {
    /// Refuses an http(s) repository whose host the policy does not allow, before connecting
    /// (an ssh host is checked as it is resolved).
    fn check_host(&self) -> Result<(), SourceError> {
        match url::Url::parse(&self.url) {
            Ok(url) if url.scheme().starts_with("http") => {
                self.policy.check_url(&url).map_err(|r| {
                    SourceError::new(reasons::HOST_NOT_ALLOWED, format!("{}: {r}", self.shown))
                })
            }
            _ => Ok(()),
        }
    }
}

/// What an ssh server wrote to stderr during an operation (its reason for refusing).
type Said = Arc<Mutex<Vec<u8>>>;

/// The most a handshake and ref advertisement may be, over https or ssh. With protocol v2 the
/// answer names one ref; a server speaking v0 sends all its refs, and 16 MiB holds about
/// 250,000 of them.
const LS_REFS_BYTES: u64 = 16 << 20;

/// How a fetch went wrong, beyond what gix says: the watchdog's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    Deadline,
    TooLarge,
}

/// A fetched commit, and the scratch repository holding its objects (removed on drop).
pub struct Fetched {
    /// The commit, after peeling a tag.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Bytes the fetch wrote (the pack and its index).
    pub bytes: u64,
    repo: gix::Repository,
    _dir: tempfile::TempDir,
}

impl Fetched {
    /// Read access to the fetched objects; a tree larger than `max_bytes` is refused before
    /// it is decoded.
    pub fn objects(&self, max_bytes: u64) -> impl Objects + '_ {
        Odb {
            repo: &self.repo,
            max_bytes,
        }
    }
}

/// Asks the remote which commit `want` (a branch or tag) points at: the handshake and one
/// `ls-refs` for that ref alone. `scratch` is a directory for a throwaway repository.
pub fn ls_ref(remote: &Remote, want: &Want, scratch: &Path) -> Result<ObjectId, SourceError> {
    remote.check_host()?;
    let dir = scratch_dir(scratch)?;
    let repo = init(dir.path(), LS_REFS_BYTES)?;
    let handle = remote_for(&repo, remote, want)?;
    let said = Said::default();
    // The advertisement of a server with many refs is bounded as a pack would be.
    let budget = Budget::new(LS_REFS_BYTES);
    let (map, _) = connect(&handle, remote, dir.path(), &said, &budget)
        .and_then(|c| c.ref_map(gix::progress::Discard, ref_map_options()))
        .map_err(|e| {
            let stopped = budget.exceeded().then_some(Stopped::TooLarge);
            classify(remote, "listing refs of", &e, stopped, &said)
        })?;
    resolve(&map, remote, want)
}

/// Fetches the commit of `want` with depth 1 into a scratch repository under `scratch`,
/// giving up when the pack grows past `max_bytes` or the timeout passes.
pub fn fetch(
    remote: &Remote,
    want: &Want,
    scratch: &Path,
    max_bytes: u64,
) -> Result<Fetched, SourceError> {
    remote.check_host()?;
    let dir = scratch_dir(scratch)?;
    let repo = init(dir.path(), max_bytes)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    let watchdog = Watchdog::start(
        dir.path().to_path_buf(),
        Instant::now() + remote.timeout,
        max_bytes,
        interrupt.clone(),
    );
    let handle = remote_for(&repo, remote, want)?;
    let said = Said::default();
    let budget = Budget::new(max_bytes);
    let result = receive(
        &handle,
        remote,
        want,
        &interrupt,
        dir.path(),
        &said,
        &budget,
    );
    let stopped = watchdog
        .stop()
        .or(budget.exceeded().then_some(Stopped::TooLarge));
    let commit = result.map_err(|e| classify(remote, "fetching from", &e, stopped, &said))?;
    let commit = peel_to_commit(&repo, commit).map_err(|message| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!("{}: {message}", remote.shown),
        )
    })?;
    let tree = repo
        .find_commit(commit)
        .map_err(|e| read_failed(remote, &e))?
        .tree_id()
        .map_err(|e| read_failed(remote, &e))?
        .detach();
    Ok(Fetched {
        commit,
        tree,
        bytes: size_of(dir.path()),
        repo,
        _dir: dir,
    })
}

fn receive(
    handle: &gix::Remote<'_>,
    remote: &Remote,
    want: &Want,
    interrupt: &AtomicBool,
    scratch: &Path,
    said: &Said,
    budget: &Arc<Budget>,
) -> Result<ObjectId, gix::Error> {
    let prepare = connect(handle, remote, scratch, said, budget)?
        .prepare_fetch(gix::progress::Discard, ref_map_options())?;
    let target = match want {
        Want::Commit(id) => *id,
        _ => prepare
            .ref_map()
            .mappings
            .iter()
            .find_map(|m| m.remote.as_id().map(|id| id.to_owned()))
            .ok_or_else(|| gix::Error::from_error(missing_ref(remote, want)))?,
    };
    let depth = std::num::NonZeroU32::MIN;
    prepare
        .with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(depth))
        .receive(gix::progress::Discard, interrupt)?;
    Ok(target)
}

/// The largest commit or tag object read (a server could send a huge one to exhaust memory).
const MAX_OBJECT_BYTES: u64 = 1 << 20;

/// The commit a tag object (or a short chain of them) points at; each object's size is checked
/// from its header before it is read.
fn peel_to_commit(repo: &gix::Repository, id: ObjectId) -> Result<ObjectId, String> {
    let mut current = id;
    for _ in 0..8 {
        let header = repo
            .find_header(current)
            .map_err(|e| format!("the fetched object {current} is missing: {e}"))?;
        if header.size() > MAX_OBJECT_BYTES {
            return Err(format!(
                "object {current} is {} bytes, more than a commit or tag may be ({MAX_OBJECT_BYTES})",
                header.size()
            ));
        }
        match header.kind() {
            gix::objs::Kind::Commit => return Ok(current),
            gix::objs::Kind::Tag => {
                current = repo
                    .find_tag(current)
                    .map_err(|e| format!("reading tag {current}: {e}"))?
                    .target_id()
                    .map_err(|e| format!("reading tag {current}: {e}"))?
                    .detach();
            }
            other => return Err(format!("{id} leads to a {other}, not a commit")),
        }
    }
    Err(format!("{id} is a chain of more than 8 tags"))
}

fn ref_map_options() -> gix::remote::ref_map::Options {
    gix::remote::ref_map::Options::default()
}

/// A remote for `want` alone, with nothing from the host's git configuration.
fn remote_for<'repo>(
    repo: &'repo gix::Repository,
    remote: &Remote,
    want: &Want,
) -> Result<gix::Remote<'repo>, SourceError> {
    let spec = want.refspec();
    repo.remote_at(remote.url.as_str())
        .and_then(|r| {
            r.with_fetch_tags(gix::remote::fetch::Tags::None)
                .with_refspecs([spec.as_str()], Direction::Fetch)
        })
        .map_err(|e| {
            SourceError::new(
                super::spec::INVALID_SPEC,
                format!("{}: {}", remote.shown, chain(&e)),
            )
        })
}

/// A connection to `handle`: over our SSH session for ssh URLs, else with our credentials and
/// HTTP client; what the server sends is bounded by `budget` either way. `scratch` is the
/// run's scratch folder.
fn connect<'a, 'repo>(
    handle: &'a gix::Remote<'repo>,
    remote: &Remote,
    scratch: &Path,
    said: &Said,
    budget: &Arc<Budget>,
) -> Result<
    gix::remote::Connection<'a, 'static, 'repo, Box<dyn http_transport::Transport + Send>>,
    gix::Error,
> {
    if let Some(auth) = &remote.ssh {
        let target = super::ssh::target(&remote.url).map_err(gix::Error::from_error)?;
        let bounds = super::ssh::Bounds {
            timeout: remote.timeout,
            max_bytes: budget.limit(),
            stderr: said.clone(),
            policy: remote.policy.clone(),
        };
        let transport = super::ssh::connect(&target, auth, &bounds, scratch, &remote.shown)
            .map_err(gix::Error::from_error)?;
        let boxed: Box<dyn http_transport::Transport + Send> = Box::new(transport);
        return Ok(handle.to_connection_with_transport(boxed));
    }
    // gix's own HTTP backend, with every response body counted against the budget.
    let url = gix::url::parse(gix::bstr::BStr::new(remote.url.as_bytes()))?;
    let transport = http::connect_http(
        BoundedHttp::new(budget.clone()),
        url,
        gix::protocol::transport::Protocol::V2,
        false,
    );
    let boxed: Box<dyn http_transport::Transport + Send> = Box::new(transport);
    let mut connection = handle.to_connection_with_transport(boxed);
    let account = remote.account.clone();
    connection.set_credentials(move |action| match action {
        gix::credentials::helper::Action::Get(context) => {
            Ok(account
                .clone()
                .map(|(username, password)| gix::credentials::protocol::Outcome {
                    identity: Account {
                        username,
                        password,
                        oauth_refresh_token: None,
                    },
                    next: context.into(),
                }))
        }
        // Nothing is stored or forgotten: there is no credential store.
        _ => Ok(None),
    });
    connection.set_transport_options(Box::new(http_options(remote)));
    Ok(connection)
}

mod http_transport {
    pub use gix::protocol::transport::client::blocking_io::Transport;
}

fn http_options(remote: &Remote) -> http::Options {
    let ca = remote.ca.clone();
    let timeout = remote.timeout;
    let resolver = remote.policy.resolver();
    let backend = http::reqwest::Options {
        configure_client: Some(Box::new(move |mut builder| {
            for cert in &ca {
                builder = builder.add_root_certificate(cert.clone());
            }
            Ok(builder
                .timeout(timeout)
                .connect_timeout(timeout.min(Duration::from_secs(30)))
                // Every address a name resolves to obeys the network policy.
                .dns_resolver(resolver.clone()))
        })),
        configure_request: None,
    };
    http::Options {
        user_agent: Some(concat!("olm-rs-catalogd/", env!("CARGO_PKG_VERSION")).into()),
        connect_timeout: Some(timeout.min(Duration::from_secs(30))),
        backend: Some(Arc::new(Mutex::new(backend))),
        // gix would send later requests to where a redirect pointed (an address it connects
        // to without asking the policy's resolver): a repository is named by its own URL.
        follow_redirects: http::options::FollowRedirects::None,
        ..Default::default()
    }
}

/// The commit a branch or tag points at in `map`, peeled.
fn resolve(
    map: &gix::protocol::fetch::RefMap,
    remote: &Remote,
    want: &Want,
) -> Result<ObjectId, SourceError> {
    let name = want.ref_name();
    map.remote_refs
        .iter()
        .find_map(|r| {
            let (ref_name, target, peeled) = r.unpack();
            (Some(ref_name.to_string()) == name)
                .then(|| peeled.or(target).map(|id| id.to_owned()))
                .flatten()
        })
        .ok_or_else(|| missing_ref(remote, want))
}

fn missing_ref(remote: &Remote, want: &Want) -> SourceError {
    SourceError::new(
        reasons::SOURCE_NOT_FOUND,
        format!("{} has no {}", remote.shown, want.describe()),
    )
}

fn scratch_dir(scratch: &Path) -> Result<tempfile::TempDir, SourceError> {
    std::fs::create_dir_all(scratch)
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix("fetch-")
                .tempdir_in(scratch)
        })
        .map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "creating a scratch repository in {}: {e}",
                    scratch.display()
                ),
            )
        })
}

/// An empty bare repository that ignores the host's git configuration, and in which no
/// object larger than `max_bytes` is ever inflated: a pack entry declares its size before its
/// (compressed) data, and a tiny pack may declare gigabytes (a file of zeros compresses a
/// thousandfold), which gix would otherwise allocate while indexing the pack. One thread
/// indexes, so at most one object's buffers are held at a time.
fn init(dir: &Path, max_bytes: u64) -> Result<gix::Repository, SourceError> {
    let options = gix::open::Options::isolated().config_overrides([
        format!("gitoxide.objects.allocLimit={max_bytes}"),
        "pack.threads=1".to_owned(),
    ]);
    gix::ThreadSafeRepository::init_opts(
        dir,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        options,
    )
    .map(gix::Repository::from)
    .map_err(|e| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!("creating a scratch repository: {}", chain(&e)),
        )
    })
}

fn read_failed(remote: &Remote, e: &dyn std::fmt::Display) -> SourceError {
    SourceError::new(
        reasons::UNPACK_FAILED,
        format!("reading the fetched commit of {}: {e}", remote.shown),
    )
}

/// A gix error as a condition: missing repositories and refused credentials get their own
/// reasons; `stopped` is the watchdog's verdict when it interrupted the fetch.
fn classify(
    remote: &Remote,
    doing: &str,
    e: &gix::Error,
    stopped: Option<Stopped>,
    said: &Said,
) -> SourceError {
    let said = String::from_utf8_lossy(&said.lock().unwrap_or_else(PoisonError::into_inner))
        .trim()
        .to_owned();
    match stopped {
        Some(Stopped::Deadline) => {
            return SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "fetching from {} took longer than {}s (--git-timeout-seconds)",
                    remote.shown,
                    remote.timeout.as_secs()
                ),
            );
        }
        Some(Stopped::TooLarge) => {
            return SourceError::new(
                reasons::CONTENT_TOO_LARGE,
                format!(
                    "{doing} {}: what the server sent is larger than catalogd accepts (--max-content-bytes; a ref advertisement at most {LS_REFS_BYTES} bytes); it stopped",
                    remote.shown
                ),
            );
        }
        None => {}
    }
    if let Some(found) = e
        .iter_errors()
        .find_map(|e| e.downcast_ref::<SourceError>())
    {
        return found.clone();
    }
    if e.classify().is_resource_exhausted() {
        return SourceError::new(
            reasons::CONTENT_TOO_LARGE,
            format!(
                "{doing} {}: an object of the commit is larger than catalogd accepts (--max-content-bytes), so it was not inflated; fetching stopped",
                remote.shown
            ),
        );
    }
    if let Some(refused) = e.iter_errors().find_map(NetworkPolicy::refusal_in) {
        return SourceError::new(
            reasons::HOST_NOT_ALLOWED,
            format!("{doing} {}: {refused}", remote.shown),
        );
    }
    let timed_out = e.iter_errors().any(|e| {
        e.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
    });
    if timed_out {
        return SourceError::new(
            reasons::UNPACK_FAILED,
            format!(
                "{doing} {} took longer than {}s (--git-timeout-seconds)",
                remote.shown,
                remote.timeout.as_secs()
            ),
        );
    }
    let status = e.iter_errors().find_map(|e| {
        e.downcast_ref::<reqwest::Error>()
            .and_then(reqwest::Error::status)
    });
    let mut text = chain(e);
    if !said.is_empty() {
        // An ssh server says why in its own words; they decide the reason.
        let lower = said.to_ascii_lowercase();
        let reason = if [
            "does not appear to be a git repository",
            "not found",
            "no such",
        ]
        .iter()
        .any(|w| lower.contains(w))
        {
            reasons::SOURCE_NOT_FOUND
        } else if ["denied", "not authorized", "unauthorized", "forbidden"]
            .iter()
            .any(|w| lower.contains(w))
        {
            reasons::UNAUTHORIZED
        } else {
            reasons::UNPACK_FAILED
        };
        text = format!("the server said: {said}");
        if reason != reasons::UNPACK_FAILED {
            return SourceError::new(reason, format!("{doing} {}: {text}", remote.shown));
        }
    }
    let unauthorized = status.is_some_and(|s| s.as_u16() == 401 || s.as_u16() == 403)
        || e.classify().is_unauthenticated()
        || e.classify().is_permission_denied();
    if unauthorized {
        // Without credentials, gix's own words are about its (absent) credential helper.
        let message = if remote.ssh.is_some() {
            format!(
                "{doing} {}: the server refused access with the key in git.authSecret ({text})",
                remote.shown
            )
        } else if remote.account.is_some() {
            format!(
                "{doing} {}: the credentials in git.authSecret were refused ({text})",
                remote.shown
            )
        } else {
            format!(
                "{doing} {}: the repository needs credentials: name an opted-in Secret in git.authSecret",
                remote.shown
            )
        };
        return SourceError::new(reasons::UNAUTHORIZED, message);
    }
    if let Some(commit) = text
        .split("not our ref ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_hexdigit()).next())
    {
        return SourceError::new(
            reasons::SOURCE_NOT_FOUND,
            format!(
                "{} does not serve commit {commit}: it does not exist there, or the server serves only commits its branches and tags point at (git's uploadpack.allowReachableSHA1InWant)",
                remote.shown
            ),
        );
    }
    if status.is_some_and(|s| s.as_u16() == 404) || text.contains("HTTP status 404") {
        return SourceError::new(
            reasons::SOURCE_NOT_FOUND,
            format!("{} does not exist (HTTP 404)", remote.shown),
        );
    }
    let hint = if text.contains("certificate") {
        "; if the server's certificate is signed by a private CA, name it in git.caBundle"
    } else {
        ""
    };
    SourceError::new(
        reasons::UNPACK_FAILED,
        format!("{doing} {}: {text}{hint}", remote.shown),
    )
}

/// Every message of an error's chain, outermost first.
fn chain(e: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for err in e.iter_errors() {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// Interrupts a fetch at its deadline, or when the scratch repository (the pack being
/// written) grows past the limit, so neither a slow nor a huge remote can hold catalogd.
struct Watchdog {
    done: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Option<Stopped>>>,
}

impl Watchdog {
    fn start(dir: PathBuf, deadline: Instant, max_bytes: u64, interrupt: Arc<AtomicBool>) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let finished = done.clone();
        let handle = std::thread::Builder::new()
            .name("git-watchdog".into())
            .spawn(move || {
                while !finished.load(Ordering::Relaxed) {
                    let verdict = if Instant::now() >= deadline {
                        Some(Stopped::Deadline)
                    } else if size_of(&dir) > max_bytes {
                        Some(Stopped::TooLarge)
                    } else {
                        None
                    };
                    if verdict.is_some() {
                        interrupt.store(true, Ordering::Relaxed);
                        return verdict;
                    }
                    std::thread::park_timeout(Duration::from_millis(50));
                }
                None
            })
            .ok();
        Watchdog { done, handle }
    }

    fn stop(mut self) -> Option<Stopped> {
        self.done.store(true, Ordering::Relaxed);
        let handle = self.handle.take()?;
        handle.thread().unpark();
        handle.join().ok().flatten()
    }
}

/// Bytes of the files under `dir`.
fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => pending.push(entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// The fetched objects, read through gix.
struct Odb<'a> {
    repo: &'a gix::Repository,
    max_bytes: u64,
}

impl Objects for Odb<'_> {
    fn tree(&self, id: &ObjectId) -> Result<Vec<Item>, String> {
        let size = self.size(id)?;
        if size > self.max_bytes {
            return Err(format!(
                "tree {id} is {size} bytes, more than catalogd accepts (--max-content-bytes)"
            ));
        }
        let tree = self.repo.find_tree(*id).map_err(|e| e.to_string())?;
        let decoded = tree.decode().map_err(|e| e.to_string())?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| Item {
                name: e.filename.to_vec(),
                kind: match e.mode.kind() {
                    gix::objs::tree::EntryKind::Tree => Kind::Tree,
                    gix::objs::tree::EntryKind::Link => Kind::Link,
                    gix::objs::tree::EntryKind::Commit => Kind::Submodule,
                    _ => Kind::Blob,
                },
                id: e.oid.to_owned(),
            })
            .collect())
    }

    fn size(&self, id: &ObjectId) -> Result<u64, String> {
        self.repo
            .find_header(*id)
            .map(|h| h.size())
            .map_err(|e| e.to_string())
    }

    fn blob(&self, id: &ObjectId) -> Result<Vec<u8>, String> {
        self.repo
            .find_blob(*id)
            .map(|b| b.detach().data)
            .map_err(|e| e.to_string())
    }
}
