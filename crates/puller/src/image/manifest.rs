//! Manifests as the registry sends them: an image manifest, or an index from which the puller
//! picks the linux image of the architecture it runs on.

use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, ImageIndexEntry,
    OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageIndex, OciImageManifest,
};
use serde::Deserialize;

/// The manifest media types catalogd accepts.
pub const ACCEPTED: &[&str] = &[
    OCI_IMAGE_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

/// A parsed manifest.
#[derive(Debug)]
pub enum Manifest {
    /// One image.
    Image(Box<OciImageManifest>),
    /// An index of images.
    Index(OciImageIndex),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
}

/// Parses manifest bytes; the error says what the bytes are not.
pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
    let probe: Probe =
        serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let index = match probe.media_type.as_deref() {
        Some(OCI_IMAGE_INDEX_MEDIA_TYPE | IMAGE_MANIFEST_LIST_MEDIA_TYPE) => true,
        Some(OCI_IMAGE_MEDIA_TYPE | IMAGE_MANIFEST_MEDIA_TYPE) => false,
        // An OCI manifest may omit its media type; an index is the one with `manifests`.
        None => probe.manifests.is_some(),
        Some(other) => {
            return Err(format!(
                "the manifest has media type {other}, which is not an image or an image index"
            ));
        }
    };
    if index {
        serde_json::from_slice(bytes)
            .map(Manifest::Index)
            .map_err(|e| format!("the image index does not parse: {e}"))
    } else {
        serde_json::from_slice(bytes)
            .map(|m| Manifest::Image(Box::new(m)))
            .map_err(|e| format!("the image manifest does not parse: {e}"))
    }
}

/// The OCI name of the architecture catalogd runs on.
pub fn running_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        other => other,
    }
}

/// The digest of the linux image for `architecture` in `index`, or a message naming the
/// platforms it has.
pub fn pick(entries: &[ImageIndexEntry], architecture: &str) -> Result<String, String> {
    let platform = |e: &ImageIndexEntry| {
        e.platform
            .as_ref()
            .map(|p| (p.os.to_string(), p.architecture.to_string()))
    };
    if let Some(entry) = entries
        .iter()
        .find(|e| platform(e).is_some_and(|(os, arch)| os == "linux" && arch == architecture))
    {
        return Ok(entry.digest.clone());
    }
    // An index of one image without a platform (as some tools write) is that image.
    if let [only] = entries
        && only.platform.is_none()
    {
        return Ok(only.digest.clone());
    }
    let have: Vec<String> = entries
        .iter()
        .map(|e| {
            platform(e).map_or_else(|| "unknown".to_owned(), |(os, arch)| format!("{os}/{arch}"))
        })
        .collect();
    Err(format!(
        "the image index has no linux/{architecture} image (it has {})",
        if have.is_empty() {
            "none".to_owned()
        } else {
            have.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(platforms: &[(&str, &str)]) -> Vec<ImageIndexEntry> {
        let json = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE,
            "manifests": platforms.iter().enumerate().map(|(i, (os, arch))| serde_json::json!({
                "mediaType": OCI_IMAGE_MEDIA_TYPE,
                "digest": format!("sha256:{i}"),
                "size": 1,
                "platform": {"os": os, "architecture": arch},
            })).collect::<Vec<_>>(),
        });
        match parse(json.to_string().as_bytes()).unwrap() {
            Manifest::Index(i) => i.manifests,
            Manifest::Image(_) => panic!("an index"),
        }
    }

    #[test]
    fn the_linux_image_of_the_architecture_is_picked() {
        let entries = index(&[("windows", "amd64"), ("linux", "arm64"), ("linux", "amd64")]);
        assert_eq!(pick(&entries, "amd64").unwrap(), "sha256:2");
        assert_eq!(pick(&entries, "arm64").unwrap(), "sha256:1");
        let err = pick(&entries, "s390x").unwrap_err();
        assert!(
            err.contains("no linux/s390x image (it has windows/amd64, linux/arm64, linux/amd64)"),
            "{err}"
        );
    }

    #[test]
    fn manifests_are_told_apart_with_or_without_a_media_type() {
        let image = br#"{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:a","size":1},"layers":[]}"#;
        assert!(matches!(parse(image), Ok(Manifest::Image(_))));
        let bare_index = br#"{"schemaVersion":2,"manifests":[]}"#;
        assert!(matches!(parse(bare_index), Ok(Manifest::Index(_))));
        let other = br#"{"schemaVersion":2,"mediaType":"application/vnd.cncf.helm.chart"}"#;
        assert!(parse(other).unwrap_err().contains("not an image"));
        assert!(parse(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_running_architecture_has_its_oci_name() {
        #[cfg(target_arch = "x86_64")]
        assert_eq!(running_architecture(), "amd64");
        #[cfg(target_arch = "aarch64")]
        assert_eq!(running_architecture(), "arm64");
    }
}
