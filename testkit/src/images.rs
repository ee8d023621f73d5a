//! Catalog images for tests: layers built entry by entry (hostile ones included, which
//! `tar::Builder` refuses to write), and pushed with oci-client to a test [`Registry`].

use std::collections::BTreeMap;

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::{IMAGE_LAYER_GZIP_MEDIA_TYPE, IMAGE_LAYER_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use crate::registry::Registry;
use crate::{Error, Result};

/// The label naming an index image's FBC directory.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// One tar entry.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A regular file.
    File(String, Vec<u8>),
    /// An executable file (mode 0755).
    Executable(String, Vec<u8>),
    /// A directory.
    Dir(String),
    /// A symbolic link and its target.
    Symlink(String, String),
    /// A hard link and the path it links to.
    HardLink(String, String),
}

/// A layer: gzip of a tar, or a tar.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The bytes (gzip, or a plain tar).
    pub data: Vec<u8>,
    /// sha256 of the uncompressed tar (the config's diff_id).
    pub diff_id: String,
}

/// A layer of `entries`, written header by header.
pub fn layer(entries: &[Entry]) -> Layer {
    let tar = tar_of(entries);
    let diff_id = sha256(&tar);
    Layer {
        data: crate::tar_archive::gzip(&tar),
        diff_id,
    }
}

/// A layer of `entries`, uncompressed: for layers of large binaries, where gzip would cost
/// seconds per image and save nothing a loopback registry needs.
pub fn tar_layer(entries: &[Entry]) -> Layer {
    let tar = tar_of(entries);
    Layer {
        diff_id: sha256(&tar),
        data: tar,
    }
}

/// A layer holding `files` (path, content) under `dir` (such as `configs`).
pub fn fbc_layer(dir: &str, files: &[(&str, &str)]) -> Layer {
    let mut entries = vec![Entry::Dir(dir.to_owned())];
    entries.extend(
        files
            .iter()
            .map(|(p, c)| Entry::File(format!("{dir}/{p}"), c.as_bytes().to_vec())),
    );
    layer(&entries)
}

/// A base layer like a catalog image's: a binary and a few system files outside the catalog.
pub fn base_layer() -> Layer {
    layer(&[
        Entry::Dir("bin".into()),
        Entry::File("bin/opm".into(), b"\x7fELF not really".to_vec()),
        Entry::Dir("etc".into()),
        Entry::File("etc/passwd".into(), b"root:x:0:0::/:/bin/opm\n".to_vec()),
        Entry::Symlink("bin/sh".into(), "/bin/opm".into()),
    ])
}

fn tar_of(entries: &[Entry]) -> Vec<u8> {
    let mut tar = Vec::new();
    for entry in entries {
        let (path, kind, data, link): (&str, tar::EntryType, &[u8], &str) = match entry {
            Entry::File(p, d) | Entry::Executable(p, d) => (p, tar::EntryType::Regular, d, ""),
            Entry::Dir(p) => (p, tar::EntryType::Directory, b"", ""),
            Entry::Symlink(p, t) => (p, tar::EntryType::Symlink, b"", t),
            Entry::HardLink(p, t) => (p, tar::EntryType::Link, b"", t),
        };
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(
            if kind == tar::EntryType::Directory || matches!(entry, Entry::Executable(..)) {
                0o755
            } else {
                0o644
            },
        );
        let name = &mut header.as_old_mut().name;
        let n = path.len().min(name.len());
        name[..n].copy_from_slice(&path.as_bytes()[..n]);
        let linkname = &mut header.as_old_mut().linkname;
        let n = link.len().min(linkname.len());
        linkname[..n].copy_from_slice(&link.as_bytes()[..n]);
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    tar.resize(tar.len() + 1024, 0);
    tar
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// `len` bytes that gzip cannot shrink (a binary's worth of layer), derived from `seed`.
pub fn noise(len: usize, seed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut block = Sha256::digest(seed).to_vec();
    while out.len() < len {
        block = Sha256::digest(&block).to_vec();
        out.extend_from_slice(&block);
    }
    out.truncate(len);
    out
}

/// The OCI name of this machine's architecture.
pub fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// An oci-client for `registry` (plain HTTP, or TLS trusting the harness CA).
pub fn client(registry: &Registry) -> Result<Client> {
    let mut config = ClientConfig {
        protocol: if registry.credentials.is_some() {
            ClientProtocol::Https
        } else {
            ClientProtocol::Http
        },
        ..Default::default()
    };
    if registry.credentials.is_some() {
        config.extra_root_certificates.push(Certificate {
            encoding: CertificateEncoding::Pem,
            data: crate::tls::ca()?.pem.clone().into_bytes(),
        });
    }
    Ok(Client::new(config))
}

fn auth(registry: &Registry) -> RegistryAuth {
    match &registry.credentials {
        Some(c) => RegistryAuth::Basic(c.user.clone(), c.password.clone()),
        None => RegistryAuth::Anonymous,
    }
}

/// Pushes an image of `layers` (base first) as `registry/repository:tag`, with `labels` in its
/// config; returns the manifest's digest.
pub async fn push(
    registry: &Registry,
    repository: &str,
    tag: &str,
    layers: &[Layer],
    labels: &BTreeMap<String, String>,
) -> Result<String> {
    push_configured(
        registry,
        repository,
        tag,
        layers,
        serde_json::json!({"Labels": labels}),
    )
    .await
}

/// Pushes an image of `layers` (base first) whose config's `config` (what a container runs:
/// `Entrypoint`, `User`, `Labels`, ...) is `run`; returns the manifest's digest.
pub async fn push_configured(
    registry: &Registry,
    repository: &str,
    tag: &str,
    layers: &[Layer],
    run: serde_json::Value,
) -> Result<String> {
    let config = serde_json::json!({
        "architecture": architecture(),
        "os": "linux",
        "config": run,
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>()},
    });
    let image_layers: Vec<ImageLayer> = layers
        .iter()
        .map(|l| {
            // gzip's magic number, else a plain tar.
            let media_type = if l.data.starts_with(&[0x1f, 0x8b]) {
                IMAGE_LAYER_GZIP_MEDIA_TYPE
            } else {
                IMAGE_LAYER_MEDIA_TYPE
            };
            ImageLayer::new(l.data.clone(), media_type.into(), None)
        })
        .collect();
    let config = Config::oci_v1(serde_json::to_vec(&config).unwrap_or_default(), None);
    let manifest = OciImageManifest::build(&image_layers, &config, None);
    push_manifest(registry, repository, tag, &image_layers, config, manifest).await
}

/// Pushes `layers` and `config` with the given `manifest` (which may lie about them);
/// returns the manifest's digest.
pub async fn push_manifest(
    registry: &Registry,
    repository: &str,
    tag: &str,
    layers: &[ImageLayer],
    config: Config,
    manifest: OciImageManifest,
) -> Result<String> {
    let reference: Reference = format!("{}/{repository}:{tag}", registry.host)
        .parse()
        .map_err(|e| Error::Document(format!("image reference: {e}")))?;
    let client = client(registry)?;
    let auth = auth(registry);
    client
        .push(&reference, layers, config, &auth, Some(manifest))
        .await
        .map_err(|e| Error::Fixture(format!("pushing {reference}: {e}")))?;
    client
        .fetch_manifest_digest(&reference, &auth)
        .await
        .map_err(|e| Error::Fixture(format!("reading the digest of {reference}: {e}")))
}

/// Pushes the FBC `files` under `/configs` on a base layer, labelled as catalog images are.
pub async fn push_catalog(
    registry: &Registry,
    repository: &str,
    tag: &str,
    files: &[(&str, &str)],
) -> Result<String> {
    let labels = [(CONFIGS_LABEL.to_owned(), "/configs".to_owned())].into();
    push(
        registry,
        repository,
        tag,
        &[base_layer(), fbc_layer("configs", files)],
        &labels,
    )
    .await
}
