//! Tar archives for tests, written header by header: `tar::Builder` itself refuses the hostile
//! paths and links the tests of archives and image layers need.

/// One entry: path, type, content, link target.
pub type Entry<'a> = (&'a str, tar::EntryType, &'a [u8], &'a str);

/// A tar of `entries`, with its end-of-archive blocks.
pub fn tar(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut tar = Vec::new();
    for (path, kind, data, link) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    tar.resize(tar.len() + 1024, 0);
    tar
}

/// `bytes`, gzipped.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = std::io::Write::write_all(&mut gz, bytes);
    gz.finish().unwrap_or_default()
}

/// A regular file.
pub fn file(path: &'static str, data: &'static [u8]) -> Entry<'static> {
    (path, tar::EntryType::Regular, data, "")
}

/// A symbolic link.
pub fn symlink(path: &'static str, target: &'static str) -> Entry<'static> {
    (path, tar::EntryType::Symlink, b"", target)
}
