//! Image layers are untrusted. Two properties:
//!
//! 1. Raw input read as a layer (plain, gzip or zstd tar) never panics, and what comes out is
//!    safe: relative, normalized paths, within the size limit.
//! 2. Structured input (entries of a few kinds over a small alphabet of paths, split into
//!    layers) gives the same catalog whether the configs directory is read directly or the
//!    whole image is read and then cut down to it, whenever both succeed: the second path
//!    shares no bookkeeping of the configs directory with the first.
#![no_main]

use olm_puller::image::filesystem::ImageFs;
use libfuzzer_sys::fuzz_target;

const MAX: u64 = 64 * 1024;
const NAMES: [&str; 8] = ["configs", "a.json", "b", "..", ".wh.a.json", ".wh..wh..opq", "etc", ".wh.configs"];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        raw(rest);
    } else {
        structured(rest);
    }
});

fn raw(data: &[u8]) {
    let mut fs = ImageFs::new("/configs", MAX).unwrap();
    if fs.apply(0, data, MAX * 4).is_err() {
        return;
    }
    if let Ok(files) = fs.into_files() {
        let total: u64 = files.iter().map(|(_, c)| c.len() as u64).sum();
        assert!(total <= MAX, "{total} bytes kept past the limit");
        for (path, _) in files {
            assert!(!path.starts_with('/'), "{path}");
            assert!(path.split('/').all(|p| !p.is_empty() && p != "." && p != ".."), "{path:?}");
        }
    }
}

/// Entries of 4 bytes each: kind, two path parts (from NAMES), content or link target.
fn structured(data: &[u8]) {
    let mut layers: Vec<Vec<u8>> = vec![Vec::new()];
    for chunk in data.chunks_exact(4) {
        let path = format!(
            "{}/{}",
            NAMES[chunk[1] as usize % NAMES.len()],
            NAMES[chunk[2] as usize % NAMES.len()]
        );
        let path = path.trim_start_matches("configs/../").to_owned();
        let layer = layers.last_mut().unwrap();
        match chunk[0] % 6 {
            0 => push(layer, &path, tar_kind::FILE, &[chunk[3]; 3], ""),
            1 => push(layer, &path, tar_kind::DIR, &[], ""),
            2 => push(layer, &path, tar_kind::SYMLINK, &[], NAMES[chunk[3] as usize % NAMES.len()]),
            3 => push(layer, &path, tar_kind::HARDLINK, &[], "configs/a.json"),
            4 => push(layer, NAMES[chunk[1] as usize % NAMES.len()], tar_kind::FILE, &[], ""),
            _ => layers.push(Vec::new()),
        }
    }
    let direct = build("/configs", &layers);
    let whole = build("/", &layers);
    if let (Ok(direct), Ok(whole)) = (direct, whole) {
        let cut: Vec<(String, Vec<u8>)> = whole
            .into_iter()
            .filter_map(|(p, c)| Some((p.strip_prefix("configs/")?.to_owned(), c)))
            .collect();
        assert_eq!(direct, cut);
    }
}

fn build(root: &str, layers: &[Vec<u8>]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut fs = ImageFs::new(root, MAX).map_err(|e| e.to_string())?;
    for (i, layer) in layers.iter().enumerate() {
        let mut tar = layer.clone();
        tar.resize(tar.len() + 1024, 0);
        fs.apply(i, tar.as_slice(), MAX * 4).map_err(|e| e.to_string())?;
    }
    fs.into_files().map_err(|e| e.to_string())
}

mod tar_kind {
    pub const FILE: u8 = b'0';
    pub const HARDLINK: u8 = b'1';
    pub const SYMLINK: u8 = b'2';
    pub const DIR: u8 = b'5';
}

/// A ustar header written by hand (as hostile archives are), then the content.
fn push(tar: &mut Vec<u8>, path: &str, kind: u8, content: &[u8], link: &str) {
    let mut header = [0u8; 512];
    header[..path.len().min(100)].copy_from_slice(&path.as_bytes()[..path.len().min(100)]);
    header[100..107].copy_from_slice(b"0000644");
    header[124..135].copy_from_slice(format!("{:011o}", content.len()).as_bytes());
    header[136..147].copy_from_slice(b"00000000000");
    header[156] = kind;
    header[157..157 + link.len().min(100)].copy_from_slice(&link.as_bytes()[..link.len().min(100)]);
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    tar.extend_from_slice(&header);
    tar.extend_from_slice(content);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
}
