//! What a reconcile of one BundleDeployment does, decided from the object alone (pure):
//! leave another provisioner's object alone (unless our finalizer is on it and it is being
//! deleted: what we applied is ours to remove), make sure the finalizer is on before anything is
//! applied, uninstall what is being deleted, refuse a template it cannot serve (before any
//! fetch), or fetch and install the template.

use olm_api::bundle_deployment::{BundleDeployment, PLAIN_PROVISIONER};

use crate::settings::{self, Settings};
use crate::source::{self, Format, Refusal, Wanted};
use crate::status::Installed;
use crate::template;

/// On every BundleDeployment the provisioner has applied objects for: deleting it removes
/// them first (and keeps CRDs that still have custom resources).
pub const FINALIZER: &str = "olm-rs.io/provisioner-uninstall";

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Another provisioner's (its `spec.provisionerClassName` is not ours): untouched.
    Ignore,
    /// Being deleted with our finalizer: remove what was applied, then the finalizer.
    Uninstall,
    /// Being deleted without our finalizer: nothing of ours is left.
    Gone,
    /// Ours, without the finalizer: add it before anything is applied.
    AddFinalizer,
    /// The template asks for what this provisioner does not serve: say so in status.
    Refuse {
        /// Why.
        refusal: Refusal,
        /// The template it is about.
        wanted: Installed,
    },
    /// Fetch the template's content and install it.
    Install {
        /// Its format.
        format: Format,
        /// Where its content is.
        source: Wanted,
        /// Its hash and bundle name.
        wanted: Installed,
        /// What `spec.config` asks of the install (boxed: Deployment settings are large).
        settings: Box<Settings>,
    },
}

/// The plan for `bd`.
pub fn plan(bd: &BundleDeployment) -> Plan {
    let has_finalizer = bd
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
    // Our finalizer says we applied objects for it: deleting it removes them even when its
    // class was changed since (it could never be deleted otherwise).
    if bd.metadata.deletion_timestamp.is_some() && has_finalizer {
        return Plan::Uninstall;
    }
    if bd.spec.provisioner_class_name != PLAIN_PROVISIONER {
        return Plan::Ignore;
    }
    if bd.metadata.deletion_timestamp.is_some() {
        return if has_finalizer {
            Plan::Uninstall
        } else {
            Plan::Gone
        };
    }
    if !has_finalizer {
        return Plan::AddFinalizer;
    }
    let wanted = wanted_of(bd);
    let template = &bd.spec.template.spec;
    let checked = source::format_of(template).and_then(|format| {
        let settings = settings::of(bd.spec.config.as_ref(), format)?;
        Ok((format, source::wanted(template)?, settings))
    });
    match checked {
        Ok((format, source, settings)) => Plan::Install {
            format,
            source,
            wanted,
            settings: Box::new(settings),
        },
        Err(refusal) => Plan::Refuse { refusal, wanted },
    }
}

/// The bundle name of `bd`'s template and, for one whose format reads a `spec.config` (all
/// but plain), its config: a change of either is a new install (a BundleDeployment without a
/// config, and a plain one, whose config is not read, keep the name they had).
pub fn wanted_of(bd: &BundleDeployment) -> Installed {
    let template = serde_json::to_value(&bd.spec.template).unwrap_or_default();
    let configured = bd.spec.template.spec.provisioner_class_name != PLAIN_PROVISIONER;
    let value = match bd
        .spec
        .config
        .as_ref()
        .filter(|c| configured && !c.is_empty())
    {
        Some(config) => serde_json::json!({"template": template, "config": config}),
        None => template,
    };
    let name = bd.metadata.name.as_deref().unwrap_or_default();
    Installed {
        bundle: template::bundle_name(name, &template::hash(&value)),
    }
}

/// What `bd`'s status says is installed: its `activeBundle`.
pub fn installed_of(bd: &BundleDeployment) -> Option<Installed> {
    let bundle = bd.status.as_ref()?.active_bundle.clone()?;
    Some(Installed { bundle })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::bundle_deployment::{
        BundleDeploymentSpec, BundleDeploymentStatus, BundleImageSource, BundleSource, BundleSpec,
        BundleTemplate,
    };

    use super::*;

    fn bd(class: &str, template_class: &str, source_type: &str) -> BundleDeployment {
        let mut bd = BundleDeployment::new(
            "shop",
            BundleDeploymentSpec {
                provisioner_class_name: class.into(),
                template: BundleTemplate {
                    metadata: None,
                    spec: BundleSpec {
                        provisioner_class_name: template_class.into(),
                        source: BundleSource {
                            type_: source_type.into(),
                            image: Some(BundleImageSource {
                                r#ref: "r.io/shop:1".into(),
                                pull_secret: None,
                            }),
                            ..BundleSource::default()
                        },
                    },
                },
                config: None,
            },
        );
        bd.metadata.finalizers = Some(vec![FINALIZER.into()]);
        bd
    }

    fn deleting(mut bd: BundleDeployment) -> BundleDeployment {
        bd.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        bd
    }

    #[test]
    fn another_provisioners_bundle_deployments_are_left_alone_even_when_deleted() {
        let mut other = bd("core-rukpak-io-helm", PLAIN_PROVISIONER, "image");
        other.metadata.finalizers = Some(vec!["core.rukpak.io/helm".into()]);
        assert_eq!(plan(&other), Plan::Ignore);
        assert_eq!(plan(&deleting(other)), Plan::Ignore);
    }

    #[test]
    fn one_whose_class_changed_after_we_installed_it_is_still_uninstalled() {
        // Our finalizer is on it: we applied objects for it, and only we remove them.
        let moved = bd("core-rukpak-io-helm", PLAIN_PROVISIONER, "image");
        assert_eq!(plan(&moved), Plan::Ignore);
        assert_eq!(plan(&deleting(moved)), Plan::Uninstall);
    }

    #[test]
    fn the_finalizer_comes_before_anything_is_applied() {
        let mut b = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        b.metadata.finalizers = Some(vec!["someone-else/x".into()]);
        assert_eq!(plan(&b), Plan::AddFinalizer);
    }

    #[test]
    fn deletion_uninstalls_only_while_the_finalizer_is_there() {
        let b = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        assert_eq!(plan(&deleting(b.clone())), Plan::Uninstall);
        let mut gone = deleting(b);
        gone.metadata.finalizers = None;
        assert_eq!(plan(&gone), Plan::Gone);
    }

    #[test]
    fn a_plain_image_template_is_installed() {
        let b = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        let Plan::Install {
            format,
            source,
            wanted,
            settings,
        } = plan(&b)
        else {
            unreachable!("{:?}", plan(&b));
        };
        assert_eq!(format, Format::Plain);
        assert_eq!(*settings, Settings::default());
        assert_eq!(
            source,
            Wanted::Image {
                reference: "r.io/shop:1".into(),
                pull_secret: None
            }
        );
        assert_eq!(wanted, wanted_of(&b));
        assert!(wanted.bundle.starts_with("shop-"));
    }

    #[test]
    fn the_config_is_part_of_what_is_installed_and_is_checked_before_any_fetch() {
        let b = bd(
            PLAIN_PROVISIONER,
            olm_api::bundle_deployment::REGISTRY_PROVISIONER,
            "image",
        );
        let before = wanted_of(&b);
        // An empty config is no config: a BundleDeployment keeps the name it had.
        let mut empty = b.clone();
        empty.spec.config = Some(serde_json::Map::new());
        assert_eq!(wanted_of(&empty), before);
        let mut single = b.clone();
        let config = serde_json::json!({"watchNamespace": "team-a"});
        single.spec.config = config.as_object().cloned();
        assert_ne!(
            wanted_of(&single),
            before,
            "another install mode is another install"
        );
        let Plan::Install { settings, .. } = plan(&single) else {
            unreachable!("{:?}", plan(&single));
        };
        assert_eq!(settings.watch, Some(vec!["team-a".to_owned()]));
        // A plain bundle's config is not read: it is not part of what is installed.
        let mut plain = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        let unconfigured = wanted_of(&plain);
        plain.spec.config = serde_json::json!({"anything": 1}).as_object().cloned();
        assert_eq!(wanted_of(&plain), unconfigured);
        let mut bad = b;
        let config = serde_json::json!({"watchNamespace": "Team A"});
        bad.spec.config = config.as_object().cloned();
        assert!(
            matches!(plan(&bad), Plan::Refuse { refusal, .. } if refusal.reason == settings::INVALID_CONFIGURATION)
        );
    }

    #[test]
    fn templates_it_cannot_serve_are_refused_before_any_fetch() {
        let carvel = bd(PLAIN_PROVISIONER, "core-rukpak-io-carvel", "image");
        assert!(
            matches!(plan(&carvel), Plan::Refuse { refusal, .. } if refusal.reason == source::reasons::UNSUPPORTED_FORMAT)
        );
        let git = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "git");
        assert!(
            matches!(plan(&git), Plan::Refuse { refusal, .. } if refusal.reason == source::reasons::UNSUPPORTED_SOURCE)
        );
    }

    #[test]
    fn a_failure_of_the_installed_template_itself_is_not_told_as_an_upgrade() {
        // What is installed is known from activeBundle only, as a restarted provisioner sees it.
        let mut b = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        let wanted = wanted_of(&b);
        b.status = Some(BundleDeploymentStatus {
            active_bundle: Some(wanted.bundle.clone()),
            ..BundleDeploymentStatus::default()
        });
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let v = crate::status::verdict(
            &[],
            installed_of(&b).as_ref(),
            &wanted,
            &crate::status::Attempt::ApplyFailed("forbidden".into()),
            None,
            &now,
        );
        let c = olm_api::conditions::find_condition(&v.conditions, "Installed")
            .unwrap_or_else(|| unreachable!());
        assert_eq!(
            c.reason,
            crate::status::reasons::RECONCILE_FAILED,
            "{}",
            c.message
        );
    }

    #[test]
    fn what_is_installed_is_read_from_active_bundle_and_compared_by_name() {
        let mut b = bd(PLAIN_PROVISIONER, PLAIN_PROVISIONER, "image");
        assert_eq!(installed_of(&b), None);
        let wanted = wanted_of(&b);
        b.status = Some(BundleDeploymentStatus {
            active_bundle: Some(wanted.bundle.clone()),
            ..BundleDeploymentStatus::default()
        });
        assert_eq!(installed_of(&b), Some(wanted.clone()));
        // A changed template is another bundle.
        b.spec.template.spec.source.image = Some(BundleImageSource {
            r#ref: "r.io/shop:2".into(),
            pull_secret: None,
        });
        assert_ne!(installed_of(&b), Some(wanted_of(&b)));
    }
}
