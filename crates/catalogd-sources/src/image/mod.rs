//! The `image` source: catalog images pulled in-process from an OCI registry, by digest,
//! with the puller every manager shares (`olm_puller::image`). A poll costs one manifest HEAD:
//! when the tag still names the digest whose content is served, nothing else is asked.

pub mod facts;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::catalog::{Catalog, ResolvedImageSource, ResolvedSource, SourceType};
use olm_puller::budget::Reserve;
use olm_puller::image::{ImageRequest, ImageSource, Pulled, reference};
use olm_puller::scope;

use crate::contract::{Fetched, Mode, SourceError, since};

/// Fetches `catalog`'s image with `images` (see [`crate::Sources::fetch`]).
pub async fn fetch(
    images: &ImageSource,
    catalog: &Catalog,
    mode: &Mode,
    reserve: &Reserve,
) -> Result<Fetched, SourceError> {
    let spec = catalog.spec.source.image.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    // The served content came from this very digest: nothing to fetch when it still is.
    let served_digest = since(mode)
        .and_then(|p| p.image.as_ref())
        .and_then(|i| i.resolved_ref.as_deref())
        .and_then(reference::digest_of);
    let request = ImageRequest {
        reference: &spec.r#ref,
        field: "spec.source.image",
        pull_secret: spec.pull_secret.as_deref(),
        insecure_skip_tls_verify: spec.insecure_skip_tls_verify,
        user: scope::User::Catalog(catalog.metadata.name.clone().unwrap_or_default()),
        have: served_digest,
        dir: None,
    };
    let pulled = images.pull_image(&request, reserve).await?;
    let resolved = |by_digest: String| ResolvedSource {
        type_: Some(SourceType::Image),
        image: Some(ResolvedImageSource {
            r#ref: spec.r#ref.clone(),
            resolved_ref: Some(by_digest),
            last_poll_attempt: Some(now.clone()),
        }),
        ..Default::default()
    };
    Ok(match pulled {
        Pulled::Unchanged { by_digest, .. } => Fetched::Unchanged {
            resolved: resolved(by_digest),
        },
        Pulled::Content {
            by_digest, files, ..
        } => Fetched::Content {
            files,
            resolved: resolved(by_digest),
        },
    })
}
