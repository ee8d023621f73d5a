//! The errors of the control plane, and of the e2e harness built on it (olm-e2e re-exports
//! them: one error type for the test infrastructure).

/// Errors of the control plane and the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane could not be started, stopped or reached.
    #[error("control plane: {0}")]
    Cluster(String),
    /// A Kubernetes API call failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The client error.
        source: kube::Error,
    },
    /// A YAML or JSON document could not be read or written.
    #[error("{0}")]
    Document(String),
    /// A condition was not met before its deadline.
    #[error(
        "timed out after {seconds}s waiting for {what}{}",
        last_state_of(last_state)
    )]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline.
        seconds: u64,
        /// The object as last seen, for debugging (empty: nothing to show).
        last_state: String,
    },
    /// A fixture of olm-testkit (the PKI, a port, a process, the node's registry) failed.
    #[error(transparent)]
    Fixture(#[from] olm_testkit::Error),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

fn last_state_of(last_state: &str) -> String {
    if last_state.is_empty() {
        String::new()
    } else {
        format!("; last state: {last_state}")
    }
}

/// Result of the control plane and the harness.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches a description to a kube error.
pub fn kube_err(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let context = context.into();
    move |source| Error::Kube { context, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_shows_the_last_state_only_when_there_is_one() {
        let timeout = |last_state: &str| Error::Timeout {
            what: "etcd".into(),
            seconds: 30,
            last_state: last_state.into(),
        };
        assert_eq!(
            timeout("").to_string(),
            "timed out after 30s waiting for etcd"
        );
        assert_eq!(
            timeout("{}").to_string(),
            "timed out after 30s waiting for etcd; last state: {}"
        );
    }
}
