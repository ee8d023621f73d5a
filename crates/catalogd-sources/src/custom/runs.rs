//! The generator runs under way, in memory: which Pod runs for which Catalog and spec, the
//! hash of its one-time upload token, and what it uploaded. A restart forgets them, and
//! catalogd deletes every generator Pod at start-up, so a Pod of an earlier catalogd can
//! never upload.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use sha2::{Digest, Sha256};

/// One run.
#[derive(Debug, Clone)]
pub struct Run {
    /// The Pod.
    pub pod: String,
    /// The spec it runs.
    pub spec_hash: String,
    /// When the Pod was created.
    pub started: Instant,
    /// sha256 of its token.
    token_hash: [u8; 32],
    /// Whether the token was used (an upload was accepted).
    used: bool,
    /// The accepted upload.
    pub upload: Option<Upload>,
    /// Uploads refused for this Pod, described.
    pub rejected: Vec<String>,
}

/// An accepted upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The file.
    pub bytes: Vec<u8>,
    /// Its sha256, hex.
    pub sha256: String,
}

/// Why an upload was refused (the HTTP status and the body say so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// No run has this Pod: a forgery, or a Pod of an earlier catalogd.
    #[error("no generator run is waiting for an upload from pod {0}")]
    UnknownPod(String),
    /// The token is not the Pod's.
    #[error("the upload token is not the one catalogd gave pod {0}")]
    WrongToken(String),
    /// The token was used already.
    #[error("pod {0} uploaded already; a token is good for one upload")]
    Replayed(String),
    /// The body does not have the sha256 the collector computed.
    #[error("the body's sha256 is {actual}, not {claimed} as the collector computed")]
    Checksum {
        /// What the collector said.
        claimed: String,
        /// What arrived.
        actual: String,
    },
}

/// The runs, by Catalog uid.
#[derive(Debug, Default)]
pub struct Runs {
    runs: Mutex<HashMap<String, Run>>,
}

/// A new token: 32 random bytes, hex.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal in time independent of where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Run>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new run of `pod` for the Catalog `uid`, replacing any other, unless `max`
    /// runs of other Catalogs are under way; whether it was recorded. One lock, so concurrent
    /// reconciles never exceed `max`.
    pub fn try_start(
        &self,
        uid: &str,
        pod: &str,
        spec_hash: &str,
        token: &str,
        max: usize,
    ) -> bool {
        let mut runs = self.lock();
        if !runs.contains_key(uid) && runs.len() >= max {
            return false;
        }
        runs.insert(
            uid.to_owned(),
            Run {
                pod: pod.to_owned(),
                spec_hash: spec_hash.to_owned(),
                started: Instant::now(),
                token_hash: hash(token),
                used: false,
                upload: None,
                rejected: Vec::new(),
            },
        );
        true
    }

    /// Records a new run, whatever else runs (tests).
    pub fn start(&self, uid: &str, pod: &str, spec_hash: &str, token: &str) {
        self.try_start(uid, pod, spec_hash, token, usize::MAX);
    }

    /// The run of the Catalog `uid`.
    pub fn get(&self, uid: &str) -> Option<Run> {
        self.lock().get(uid).cloned()
    }

    /// Forgets the run of the Catalog `uid`; returns it.
    pub fn finish(&self, uid: &str) -> Option<Run> {
        self.lock().remove(uid)
    }

    /// Runs under way.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `pod` may upload with `token`, checked before its body is read (so that no one
    /// without a token makes catalogd read a body at all).
    pub fn admit(&self, pod: &str, token: &str) -> Result<(), Rejected> {
        let mut runs = self.lock();
        check(&mut runs, pod, token).map(|_| ())
    }

    /// Accepts `body` as the upload of `pod`, if `token` is its unused token and `claimed` its
    /// sha256. Hashes before taking the lock: a large body must not hold up other runs.
    pub fn accept(
        &self,
        pod: &str,
        token: &str,
        claimed: &str,
        body: Vec<u8>,
    ) -> Result<(), Rejected> {
        let actual = hex::encode(Sha256::digest(&body));
        let mut runs = self.lock();
        let run = check(&mut runs, pod, token)?;
        if !actual.eq_ignore_ascii_case(claimed.trim()) {
            return Err(refuse(
                run,
                Rejected::Checksum {
                    claimed: claimed.trim().chars().take(64).collect(),
                    actual,
                },
            ));
        }
        run.used = true;
        run.upload = Some(Upload {
            bytes: body,
            sha256: actual,
        });
        Ok(())
    }
}

/// The most refusals a run keeps (for its condition's message); more are only counted.
const KEPT_REFUSALS: usize = 3;

fn refuse(run: &mut Run, why: Rejected) -> Rejected {
    if run.rejected.len() < KEPT_REFUSALS {
        run.rejected.push(why.to_string());
    }
    why
}

/// The run of `pod`, if `token` is its unused token.
fn check<'a>(
    runs: &'a mut HashMap<String, Run>,
    pod: &str,
    token: &str,
) -> Result<&'a mut Run, Rejected> {
    let Some(run) = runs.values_mut().find(|r| r.pod == pod) else {
        return Err(Rejected::UnknownPod(pod.chars().take(253).collect()));
    };
    if !same(&run.token_hash, &hash(token)) {
        return Err(refuse(run, Rejected::WrongToken(pod.to_owned())));
    }
    if run.used {
        return Err(refuse(run, Rejected::Replayed(pod.to_owned())));
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(body: &[u8]) -> String {
        hex::encode(Sha256::digest(body))
    }

    #[test]
    fn only_the_pods_token_uploads_and_only_once() {
        let runs = Runs::default();
        let token = new_token().unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token().unwrap());
        runs.start("uid", "pod-a", "h", &token);
        let body = b"{}".to_vec();
        assert_eq!(
            runs.accept("pod-b", &token, &sha(&body), body.clone()),
            Err(Rejected::UnknownPod("pod-b".into()))
        );
        assert_eq!(
            runs.accept("pod-a", "forged", &sha(&body), body.clone()),
            Err(Rejected::WrongToken("pod-a".into()))
        );
        assert!(matches!(
            runs.accept("pod-a", &token, &sha(b"other"), body.clone()),
            Err(Rejected::Checksum { .. })
        ));
        runs.accept("pod-a", &token, &sha(&body), body.clone())
            .unwrap();
        assert_eq!(
            runs.accept("pod-a", &token, &sha(&body), body.clone()),
            Err(Rejected::Replayed("pod-a".into()))
        );
        let run = runs.finish("uid").unwrap();
        assert_eq!(run.upload.unwrap().bytes, body);
        assert_eq!(run.rejected.len(), 3);
        // Refusals kept for the message are bounded however many arrive.
        runs.start("uid", "pod-c", "h", &token);
        for _ in 0..100 {
            assert!(runs.admit("pod-c", "forged").is_err());
        }
        assert_eq!(runs.get("uid").unwrap().rejected.len(), KEPT_REFUSALS);
        assert_eq!(runs.admit("pod-c", &token), Ok(()));
        runs.finish("uid");
        assert!(runs.is_empty());
        // A finished run takes no more uploads.
        assert!(matches!(
            runs.accept("pod-a", &token, &sha(&body), body),
            Err(Rejected::UnknownPod(_))
        ));
    }

    #[test]
    fn slots_are_taken_under_one_lock() {
        let runs = Runs::default();
        assert!(runs.try_start("a", "pa", "h", "t", 1));
        assert!(!runs.try_start("b", "pb", "h", "t", 1));
        // The same Catalog replaces its own run.
        assert!(runs.try_start("a", "pa2", "h", "t", 1));
        runs.finish("a");
        assert!(runs.try_start("b", "pb", "h", "t", 1));
    }

    #[test]
    fn a_new_run_replaces_the_old_one() {
        let runs = Runs::default();
        runs.start("uid", "pod-a", "h1", "t1");
        runs.start("uid", "pod-b", "h2", "t2");
        assert_eq!(runs.len(), 1);
        assert!(matches!(
            runs.accept("pod-a", "t1", &sha(b""), Vec::new()),
            Err(Rejected::UnknownPod(_))
        ));
    }
}
