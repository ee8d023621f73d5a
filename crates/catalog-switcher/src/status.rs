//! What the switcher writes for one object, decided by a pure function from the annotation,
//! the object's current image reference and the template's outcome: the reference (only when
//! it differs, and only from a template that resolved), the conditions `TemplatesHaveResolved`
//! and `ResolvedImage` (upstream OLM v0's), and `status.imageTemplate`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use olm_api::catalog::ImageTemplateStatus;
use olm_api::conditions::condition;

use crate::render::{ALL_TEMPLATES_RESOLVED, Outcome};

/// Condition type: whether every variable of the template resolved.
pub const TEMPLATES_HAVE_RESOLVED: &str = "TemplatesHaveResolved";
/// Condition type: whether the result is the image reference in use.
pub const RESOLVED_IMAGE: &str = "ResolvedImage";
/// Upstream's message when a template resolved.
pub const RESOLVED_MESSAGE: &str = "catalog image reference was successfully resolved";

/// What to write for an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The image reference to write, when it differs from the current one.
    pub write_ref: Option<String>,
    /// The switcher's status; `None` clears it (no annotation).
    pub status: Option<SwitcherStatus>,
}

/// The switcher's part of the status.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitcherStatus {
    /// `TemplatesHaveResolved` and `ResolvedImage`.
    pub conditions: Vec<Condition>,
    /// `status.imageTemplate` (Catalogs only; a v0 CatalogSource has no such field).
    pub image_template: ImageTemplateStatus,
}

/// Decides what to write. `template` is the annotation (if any), `outcome` what it gave,
/// `current` the reference in the spec, `generation` the object's.
pub fn decide(
    template: Option<&str>,
    outcome: Option<&Outcome>,
    current: Option<&str>,
    generation: Option<i64>,
    now: Time,
) -> Decision {
    let (Some(template), Some(outcome)) = (template, outcome) else {
        return Decision {
            write_ref: None,
            status: None,
        };
    };
    match outcome {
        Outcome::Resolved(image) => Decision {
            write_ref: (current != Some(image.as_str())).then(|| image.clone()),
            status: Some(SwitcherStatus {
                conditions: vec![
                    condition(
                        TEMPLATES_HAVE_RESOLVED,
                        true,
                        ALL_TEMPLATES_RESOLVED,
                        RESOLVED_MESSAGE,
                        generation,
                        now.clone(),
                    ),
                    condition(
                        RESOLVED_IMAGE,
                        true,
                        ALL_TEMPLATES_RESOLVED,
                        image.clone(),
                        generation,
                        now,
                    ),
                ],
                image_template: ImageTemplateStatus {
                    template: Some(template.to_owned()),
                    resolved_image: Some(image.clone()),
                    message: Some(RESOLVED_MESSAGE.to_owned()),
                },
            }),
        },
        Outcome::Unresolved {
            reason,
            message,
            partial,
        } => Decision {
            // A template that cannot resolve never changes the reference.
            write_ref: None,
            status: Some(SwitcherStatus {
                conditions: vec![
                    condition(
                        TEMPLATES_HAVE_RESOLVED,
                        false,
                        reason,
                        message.clone(),
                        generation,
                        now.clone(),
                    ),
                    condition(
                        RESOLVED_IMAGE,
                        false,
                        reason,
                        partial.clone(),
                        generation,
                        now,
                    ),
                ],
                image_template: ImageTemplateStatus {
                    template: Some(template.to_owned()),
                    resolved_image: None,
                    message: Some(message.clone()),
                },
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::UNABLE_TO_RESOLVE;

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_resolved_template_writes_the_reference_only_when_it_differs() {
        let out = Outcome::Resolved("r.io/c:v1.36".into());
        let d = decide(
            Some("r.io/c:v{kube_major_version}.{kube_minor_version}"),
            Some(&out),
            Some("r.io/c:v1.35"),
            Some(2),
            now(),
        );
        assert_eq!(d.write_ref.as_deref(), Some("r.io/c:v1.36"));
        let s = d.status.unwrap();
        assert_eq!(
            s.conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
                .collect::<Vec<_>>(),
            [
                (TEMPLATES_HAVE_RESOLVED, "True", ALL_TEMPLATES_RESOLVED),
                (RESOLVED_IMAGE, "True", ALL_TEMPLATES_RESOLVED)
            ]
        );
        assert_eq!(s.conditions[1].message, "r.io/c:v1.36");
        assert_eq!(
            s.image_template.resolved_image.as_deref(),
            Some("r.io/c:v1.36")
        );
        let same = decide(Some("t"), Some(&out), Some("r.io/c:v1.36"), Some(2), now());
        assert_eq!(same.write_ref, None);
        assert!(same.status.is_some());
    }

    #[test]
    fn an_unresolved_template_never_writes_the_reference() {
        let out = Outcome::Unresolved {
            reason: UNABLE_TO_RESOLVE,
            message: "cannot construct catalog image reference, because …".into(),
            partial: "r.io/c:v{kube_minor_version}".into(),
        };
        let d = decide(
            Some("r.io/c:v{kube_minor_version}"),
            Some(&out),
            Some("r.io/c:v1.35"),
            Some(1),
            now(),
        );
        assert_eq!(d.write_ref, None);
        let s = d.status.unwrap();
        assert!(
            s.conditions
                .iter()
                .all(|c| c.status == "False" && c.reason == UNABLE_TO_RESOLVE)
        );
        assert_eq!(s.conditions[1].message, "r.io/c:v{kube_minor_version}");
        assert_eq!(s.image_template.resolved_image, None);
    }

    #[test]
    fn without_the_annotation_the_status_is_cleared_and_the_reference_left() {
        let d = decide(None, None, Some("r.io/c:v1.35"), Some(1), now());
        assert_eq!(
            d,
            Decision {
                write_ref: None,
                status: None
            }
        );
    }
}
