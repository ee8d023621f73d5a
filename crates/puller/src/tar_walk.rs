//! The one walk over untrusted tar entries, shared by the http source's archives and image
//! layers: each entry's path, refused when absolute or climbing out with `..`, normalized;
//! what it is (file, directory, link and its raw target); and a file's content, read whole
//! only when the caller asks, and refused when truncated. What a path or link may be beyond
//! that (whiteouts, the configs directory, absolute link targets) is each caller's rule.

use std::io::Read;

use super::paths::normalize;

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link, with its target as written (relative to the link's directory, or
    /// absolute).
    Symlink(String),
    /// A hard link, with the archive path it names as written.
    HardLink(String),
    /// A device, fifo or anything else a catalog has no use for.
    Other,
}

/// Why the walk stopped.
#[derive(Debug)]
pub enum WalkError {
    /// The bytes are not a readable tar.
    Unreadable(std::io::Error),
    /// An entry has an absolute path (as written).
    Absolute(String),
    /// An entry's path climbs out of the root with `..` (as written).
    ClimbsOut(String),
    /// A file has fewer bytes than its header says.
    Truncated {
        /// Its path.
        path: String,
        /// What could be read.
        got: usize,
        /// What the header says.
        size: u64,
    },
}

/// One entry, its path checked.
pub struct Item<'e, R: Read> {
    /// The path as written.
    pub raw: String,
    /// The path normalized (relative, no `.` or `..`; empty for the root itself).
    pub path: String,
    /// What it is.
    pub kind: Kind,
    entry: tar::Entry<'e, R>,
}

impl<R: Read> Item<'_, R> {
    /// The content's size, PAX extensions included (the header's own field may say 0).
    pub fn size(&self) -> u64 {
        self.entry.size()
    }

    /// The whole content: all of [`Item::size`], or [`WalkError::Truncated`] (a truncated
    /// archive must fail, not yield part of a catalog).
    pub fn read(mut self) -> Result<Vec<u8>, WalkError> {
        let size = self.entry.size();
        let mut content = Vec::with_capacity(usize::try_from(size.min(1 << 20)).unwrap_or(0));
        self.entry
            .read_to_end(&mut content)
            .map_err(WalkError::Unreadable)?;
        if content.len() as u64 != size {
            return Err(WalkError::Truncated {
                path: self.path,
                got: content.len(),
                size,
            });
        }
        Ok(content)
    }
}

/// Calls `each` with every entry of the tar read from `reader`, in archive order, until one
/// fails; an entry whose path is absolute or climbs out stops the walk.
pub fn walk<R: Read, E: From<WalkError>>(
    reader: R,
    mut each: impl FnMut(Item<'_, R>) -> Result<(), E>,
) -> Result<(), E> {
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(WalkError::Unreadable)? {
        let entry = entry.map_err(WalkError::Unreadable)?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if raw.starts_with('/') {
            return Err(WalkError::Absolute(raw).into());
        }
        let Some(path) = normalize("", &raw) else {
            return Err(WalkError::ClimbsOut(raw).into());
        };
        let header = entry.header().entry_type();
        let target = || {
            entry
                .link_name_bytes()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .unwrap_or_default()
        };
        let kind = if header.is_symlink() {
            Kind::Symlink(target())
        } else if header.is_hard_link() {
            Kind::HardLink(target())
        } else if header.is_dir() {
            Kind::Dir
        } else if header.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        each(Item {
            raw,
            path,
            kind,
            entry,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_testkit::tar_archive::{file, symlink, tar};
    use tar::EntryType;

    #[derive(Debug)]
    struct Stopped(String);

    impl From<WalkError> for Stopped {
        fn from(e: WalkError) -> Self {
            Stopped(format!("{e:?}"))
        }
    }

    /// Each entry's path, kind and (for files) content.
    type Walked = Vec<(String, Kind, Option<Vec<u8>>)>;

    fn kinds(bytes: &[u8]) -> Result<Walked, Stopped> {
        let mut out = Vec::new();
        walk(bytes, |item| {
            let (path, kind) = (item.path.clone(), item.kind.clone());
            let content = (kind == Kind::File).then(|| item.read()).transpose()?;
            out.push((path, kind, content));
            Ok::<_, Stopped>(())
        })?;
        Ok(out)
    }

    #[test]
    fn entries_come_normalized_with_their_kind_and_content() {
        let bytes = tar(&[
            file("./c/a.json", b"{}"),
            symlink("c/b.json", "a.json"),
            ("c/d", EntryType::Directory, b"", ""),
            ("c/h.json", EntryType::Link, b"", "c/a.json"),
            ("c/fifo", EntryType::Fifo, b"", ""),
        ]);
        let got = kinds(&bytes).unwrap();
        assert_eq!(
            got,
            vec![
                ("c/a.json".into(), Kind::File, Some(b"{}".to_vec())),
                ("c/b.json".into(), Kind::Symlink("a.json".into()), None),
                ("c/d".into(), Kind::Dir, None),
                ("c/h.json".into(), Kind::HardLink("c/a.json".into()), None),
                ("c/fifo".into(), Kind::Other, None),
            ]
        );
    }

    #[test]
    fn absolute_and_climbing_paths_stop_the_walk() {
        let absolute = kinds(&tar(&[file("/etc/passwd", b"x")])).unwrap_err();
        assert!(absolute.0.contains("Absolute"), "{absolute:?}");
        let climbing = kinds(&tar(&[file("c/../../x", b"x")])).unwrap_err();
        assert!(climbing.0.contains("ClimbsOut"), "{climbing:?}");
    }

    #[test]
    fn a_truncated_file_is_an_error_not_a_short_file() {
        static BIG: [u8; 600] = [b'x'; 600];
        let mut bytes = tar(&[file("c/a.json", &BIG)]);
        bytes.truncate(512 + 100);
        let err = kinds(&bytes).unwrap_err();
        assert!(
            err.0.contains("Truncated") || err.0.contains("Unreadable"),
            "{err:?}"
        );
    }
}
