//! What a generator Pod's status says, decided by a pure function: still running (and why), done
//! (the collector uploaded), or failed with a reason and a message a person can act on.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::pod::{COLLECTOR, GENERATOR};

/// Condition reasons of custom sources.
pub mod reasons {
    /// The generator exited with an error.
    pub const GENERATOR_FAILED: &str = "GeneratorFailed";
    /// The generator ran past `custom.timeout`.
    pub const GENERATOR_TIMED_OUT: &str = "GeneratorTimedOut";
    /// The generator's image cannot be pulled.
    pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
    /// The generator wrote no output file.
    pub const OUTPUT_MISSING: &str = "OutputMissing";
    /// The upload was refused (a wrong or used token, a checksum mismatch).
    pub const UPLOAD_REJECTED: &str = "UploadRejected";
    /// The collector failed otherwise (it could not reach catalogd, say).
    pub const COLLECT_FAILED: &str = "CollectFailed";
}

/// Reasons the collector writes at the start of its termination message.
const COLLECTOR_REASONS: [&str; 4] = [
    reasons::OUTPUT_MISSING,
    crate::contract::reasons::CONTENT_TOO_LARGE,
    reasons::UPLOAD_REJECTED,
    reasons::COLLECT_FAILED,
];

/// Waiting reasons of a container whose image cannot be had.
const PULL_FAILURES: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// The longest part of a termination message carried into a condition.
const MAX_MESSAGE: usize = 1024;

/// What a Pod's status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still at work; the message says where.
    Running(String),
    /// The collector finished: the upload was accepted.
    Done {
        /// The generator image, by digest, as the node reported it.
        image_digest: Option<String>,
    },
    /// It failed.
    Failed {
        /// The `Unpacked` reason.
        reason: &'static str,
        /// What happened.
        message: String,
    },
}

/// The verdict on `pod`, which has existed for `age` and whose generator may run for
/// `timeout`.
pub fn verdict(pod: &Pod, age: Duration, timeout: Duration) -> Verdict {
    let name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    );
    let status = pod.status.clone().unwrap_or_default();
    let find = |list: &Option<Vec<ContainerStatus>>, name: &str| {
        list.iter().flatten().find(|c| c.name == name).cloned()
    };
    let generator = find(&status.init_container_statuses, GENERATOR);
    let collector = find(&status.container_statuses, COLLECTOR);
    let failed = |reason, message: String| Verdict::Failed { reason, message };

    if let Some(g) = &generator {
        if let Some(waiting) = g.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let why = waiting.reason.as_deref().unwrap_or_default();
            let detail = waiting.message.as_deref().unwrap_or_default();
            if PULL_FAILURES.contains(&why) {
                return failed(
                    reasons::IMAGE_PULL_FAILED,
                    format!(
                        "the generator image {} cannot be pulled ({why}): {}",
                        g.image,
                        clip(detail)
                    ),
                );
            }
            if why == "CreateContainerConfigError" || why == "CreateContainerError" {
                return failed(
                    reasons::GENERATOR_FAILED,
                    format!(
                        "the generator container cannot start ({why}): {}",
                        clip(detail)
                    ),
                );
            }
        }
        if let Some(done) = g.state.as_ref().and_then(|s| s.terminated.as_ref())
            && done.exit_code != 0
        {
            let message = done.message.as_deref().unwrap_or_default().trim();
            let reason = done.reason.as_deref().unwrap_or("Error");
            return failed(
                reasons::GENERATOR_FAILED,
                if message.is_empty() {
                    format!(
                        "the generator exited with code {} ({reason})",
                        done.exit_code
                    )
                } else {
                    format!(
                        "the generator exited with code {} ({reason}): {}",
                        done.exit_code,
                        clip(message)
                    )
                },
            );
        }
    }
    let generator_done = generator
        .as_ref()
        .and_then(|g| g.state.as_ref())
        .is_some_and(|s| s.terminated.is_some());
    if let Some(c) = &collector
        && let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref())
    {
        let why = waiting.reason.as_deref().unwrap_or_default();
        let detail = waiting.message.as_deref().unwrap_or_default();
        if PULL_FAILURES.contains(&why) {
            return failed(
                reasons::COLLECT_FAILED,
                format!(
                    "the collector image {} cannot be pulled ({why}): {}; check catalogd's --collector-image",
                    c.image,
                    clip(detail)
                ),
            );
        }
        if why == "CreateContainerConfigError" || why == "CreateContainerError" {
            return failed(
                reasons::COLLECT_FAILED,
                format!(
                    "the collector container cannot start ({why}): {}",
                    clip(detail)
                ),
            );
        }
    }
    // The generator's deadline is catalogd's to keep; the Pod's own (later, a backstop when
    // catalogd is away) ends a stuck collector too, and the message says which step it was.
    let killed = status.reason.as_deref() == Some("DeadlineExceeded");
    if !generator_done && (age > timeout || killed) {
        return failed(
            reasons::GENERATOR_TIMED_OUT,
            format!(
                "the generator did not finish within {}s (custom.timeout); pod {name} was stopped",
                timeout.as_secs()
            ),
        );
    }
    if killed {
        return failed(
            reasons::COLLECT_FAILED,
            format!("the collector of pod {name} did not finish before the pod's deadline"),
        );
    }
    if let Some(done) = collector
        .as_ref()
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
    {
        if done.exit_code == 0 {
            return Verdict::Done {
                image_digest: generator.as_ref().and_then(digest_of),
            };
        }
        let message = done.message.as_deref().unwrap_or_default().trim();
        let reason = COLLECTOR_REASONS
            .iter()
            .find(|r| {
                message
                    .strip_prefix(**r)
                    .is_some_and(|rest| rest.starts_with(':'))
            })
            .copied()
            .unwrap_or(reasons::COLLECT_FAILED);
        let text = message
            .strip_prefix(reason)
            .and_then(|m| m.strip_prefix(':'))
            .unwrap_or(message)
            .trim();
        let text = if text.is_empty() {
            "it left no termination message; see the collector container's log".to_owned()
        } else {
            clip(text)
        };
        return failed(
            reason,
            format!(
                "the collector of pod {name} failed (exit code {}): {text}",
                done.exit_code
            ),
        );
    }
    match status.phase.as_deref() {
        Some("Failed") => failed(
            reasons::GENERATOR_FAILED,
            format!(
                "pod {name} failed: {}",
                clip(status.message.as_deref().unwrap_or("no message"))
            ),
        ),
        Some("Succeeded") => Verdict::Done {
            image_digest: generator.as_ref().and_then(digest_of),
        },
        phase => {
            let unscheduled = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message.clone());
            let step = if generator_done {
                "collecting the output"
            } else {
                "running the generator"
            };
            Verdict::Running(match unscheduled {
                Some(why) => format!("pod {name} waits to be scheduled: {}", clip(&why)),
                // No clock in the message: it is written only when it changes.
                None => format!(
                    "pod {name} is {} ({step}; the generator may run {}s)",
                    phase.unwrap_or("Pending"),
                    timeout.as_secs()
                ),
            })
        }
    }
}

/// The image by digest, from a container's `imageID` (`repo@sha256:…`, maybe with a scheme).
fn digest_of(status: &ContainerStatus) -> Option<String> {
    let id = status.image_id.trim();
    let id = id.rsplit("://").next().unwrap_or(id);
    id.contains("@sha256:").then(|| id.to_owned())
}

fn clip(text: &str) -> String {
    if text.len() <= MAX_MESSAGE {
        return text.to_owned();
    }
    let mut end = text.len() - MAX_MESSAGE;
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("…{}", &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "gen-1", "namespace": "olm-system"},
            "status": status,
        }))
        .unwrap()
    }

    fn generator(state: serde_json::Value) -> serde_json::Value {
        json!([{"name": "generator", "image": "reg.example/gen:1", "imageID": "docker-pullable://reg.example/gen@sha256:abc", "ready": false, "restartCount": 0, "state": state}])
    }

    fn collector(state: serde_json::Value) -> serde_json::Value {
        json!([{"name": "collector", "image": "catalogd", "imageID": "", "ready": false, "restartCount": 0, "state": state}])
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_pod_at_work_is_running() {
        let p = pod(
            json!({"phase": "Pending", "initContainerStatuses": generator(json!({"running": {}}))}),
        );
        match verdict(&p, Duration::from_secs(5), MIN) {
            Verdict::Running(m) => {
                assert!(
                    m.contains("running the generator; the generator may run 60s"),
                    "{m}"
                );
                assert_eq!(
                    Verdict::Running(m),
                    verdict(&p, Duration::from_secs(9), MIN)
                );
            }
            other => panic!("{other:?}"),
        }
        let p = pod(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]}),
        );
        match verdict(&p, Duration::from_secs(5), MIN) {
            Verdict::Running(m) => assert!(m.contains("waits to be scheduled: 0/3 nodes"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failing_generator_says_its_exit_code_and_last_words() {
        let p = pod(
            json!({"phase": "Failed", "initContainerStatuses": generator(json!({"terminated": {"exitCode": 3, "reason": "Error", "message": "cannot reach the package server\n"}}))}),
        );
        assert_eq!(
            verdict(&p, MIN, MIN),
            Verdict::Failed {
                reason: reasons::GENERATOR_FAILED,
                message:
                    "the generator exited with code 3 (Error): cannot reach the package server"
                        .into()
            }
        );
        let long = "x".repeat(5000);
        let p = pod(
            json!({"initContainerStatuses": generator(json!({"terminated": {"exitCode": 1, "message": long}}))}),
        );
        let Verdict::Failed { message, .. } = verdict(&p, MIN, MIN) else {
            panic!()
        };
        assert!(message.len() < 1200);
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_named() {
        let p = pod(
            json!({"phase": "Pending", "initContainerStatuses": generator(json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}))}),
        );
        let Verdict::Failed { reason, message } = verdict(&p, Duration::from_secs(1), MIN) else {
            panic!()
        };
        assert_eq!(reason, reasons::IMAGE_PULL_FAILED);
        assert!(message.contains("reg.example/gen:1"), "{message}");
    }

    #[test]
    fn a_generator_past_its_timeout_has_timed_out_but_a_collector_gets_its_grace() {
        let running = pod(
            json!({"phase": "Pending", "initContainerStatuses": generator(json!({"running": {}}))}),
        );
        let Verdict::Failed { reason, .. } = verdict(&running, Duration::from_secs(61), MIN) else {
            panic!()
        };
        assert_eq!(reason, reasons::GENERATOR_TIMED_OUT);
        let collecting = pod(json!({"phase": "Running",
            "initContainerStatuses": generator(json!({"terminated": {"exitCode": 0}})),
            "containerStatuses": collector(json!({"running": {}}))}));
        assert!(matches!(
            verdict(&collecting, Duration::from_secs(61), MIN),
            Verdict::Running(_)
        ));
        let killed = pod(json!({"phase": "Failed", "reason": "DeadlineExceeded"}));
        assert!(matches!(
            verdict(&killed, Duration::from_secs(1), MIN),
            Verdict::Failed {
                reason: reasons::GENERATOR_TIMED_OUT,
                ..
            }
        ));
        let stuck = pod(json!({"phase": "Failed", "reason": "DeadlineExceeded",
            "initContainerStatuses": generator(json!({"terminated": {"exitCode": 0}})),
            "containerStatuses": collector(json!({"running": {}}))}));
        assert!(matches!(
            verdict(&stuck, Duration::from_secs(1), MIN),
            Verdict::Failed {
                reason: reasons::COLLECT_FAILED,
                ..
            }
        ));
        let unpulled = pod(json!({"phase": "Pending",
            "initContainerStatuses": generator(json!({"terminated": {"exitCode": 0}})),
            "containerStatuses": collector(json!({"waiting": {"reason": "ErrImagePull", "message": "not found"}}))}));
        let Verdict::Failed { reason, message } = verdict(&unpulled, Duration::from_secs(1), MIN)
        else {
            panic!()
        };
        assert_eq!(reason, reasons::COLLECT_FAILED);
        assert!(message.contains("--collector-image"), "{message}");
    }

    #[test]
    fn the_collector_reports_its_own_reasons() {
        let done = |exit: i32, message: &str| {
            pod(json!({"phase": if exit == 0 {"Succeeded"} else {"Failed"},
                "initContainerStatuses": generator(json!({"terminated": {"exitCode": 0}})),
                "containerStatuses": collector(json!({"terminated": {"exitCode": exit, "message": message}}))}))
        };
        assert_eq!(
            verdict(&done(0, ""), MIN, MIN),
            Verdict::Done {
                image_digest: Some("reg.example/gen@sha256:abc".into())
            }
        );
        for (message, reason) in [
            (
                "OutputMissing: the generator wrote no file at /output/catalog.json",
                reasons::OUTPUT_MISSING,
            ),
            (
                "ContentTooLarge: 2000 bytes",
                crate::contract::reasons::CONTENT_TOO_LARGE,
            ),
            (
                "UploadRejected: HTTP 403: the token is not valid",
                reasons::UPLOAD_REJECTED,
            ),
            ("something odd", reasons::COLLECT_FAILED),
        ] {
            let Verdict::Failed {
                reason: r,
                message: m,
            } = verdict(&done(2, message), MIN, MIN)
            else {
                panic!()
            };
            assert_eq!(r, reason);
            assert!(!m.contains(&format!("{reason}:")), "{m}");
        }
    }
}
