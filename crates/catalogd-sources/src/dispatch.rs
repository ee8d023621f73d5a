//! The one dispatch over the closed set of sources: a Catalog's `spec.source.type` names
//! the source that fetches its content.

use std::sync::Arc;

use olm_api::catalog::{Catalog, SourceType};

use crate::contract::{Fetched, Mode, SourceError};
use crate::{configmaps, custom, git, http, image};
use olm_puller::budget::Reserve;

/// The sources of this catalogd, by type.
pub struct Sources {
    /// `configMaps`.
    pub config_maps: configmaps::ConfigMapsSource,
    /// `http`.
    pub http: http::HttpSource,
    /// `image`.
    pub image: olm_puller::image::ImageSource,
    /// `git`.
    pub git: git::GitSource,
    /// `custom`.
    pub custom: custom::CustomSource,
}

impl Sources {
    /// Fetches `catalog`'s content from the source its spec names, as the plan says: in full,
    /// or conditionally on what was fetched last (whose content is served), in which case the
    /// source may answer [`Fetched::Unchanged`]. Before a source reads a body into memory, it
    /// reserves its size (or the most it may be) on `reserve`: content is held only within
    /// the unpack budget.
    pub async fn fetch(
        &self,
        catalog: &Catalog,
        mode: &Mode,
        reserve: &Arc<Reserve>,
    ) -> Result<Fetched, SourceError> {
        match catalog.spec.source.type_ {
            SourceType::ConfigMaps => self.config_maps.fetch(catalog, mode).await,
            SourceType::Http => self.http.fetch(catalog, mode, reserve).await,
            SourceType::Image => image::fetch(&self.image, catalog, mode, reserve).await,
            SourceType::Git => self.git.fetch(catalog, mode, reserve).await,
            SourceType::Custom => self.custom.fetch(catalog, mode, reserve).await,
        }
    }
}
