//! An image's file system, as far as a catalog needs it: layers (tar, plain, gzip or zstd) are
//! applied in order, whiteouts and opaque whiteouts included, and only what lies under the
//! configs directory is kept in memory. Layers are untrusted: entries that escape the root
//! (`..`, absolute paths, links pointing above it) are refused wherever they are, links in the
//! configs directory must stay in it, and the kept content and each layer's unpacked size are
//! limited.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

use crate::paths::{normalize, parent};
use crate::tar_walk::{Item, Kind, WalkError, walk};

/// Links followed one after the other before giving up (a loop, or an absurd chain).
const MAX_LINK_HOPS: usize = 8;

/// The largest zstd window a layer may use, as a power of two: 2^23 = 8 MiB, the window of
/// zstd's levels 1 to 19 (levels 20 to 22 and `--long` use more, and are refused).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;
/// The prefix of whiteout files; `.wh..wh..opq` makes its directory opaque.
const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// Why a layer cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayerError {
    /// The layer or the kept content is over the limit.
    #[error("{0}")]
    TooLarge(String),
    /// An entry is hostile or unsupported.
    #[error("{0}")]
    Refused(String),
    /// The layer is not a readable tar (in gzip or zstd).
    #[error("{0}")]
    Corrupt(String),
    /// Unpacking went past the pull's deadline.
    #[error("unpacking went past the pull's deadline (--image-timeout-seconds)")]
    TimedOut,
}

impl From<WalkError> for LayerError {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::Unreadable(e) => LayerError::Corrupt(format!("not a readable tar: {e}")),
            WalkError::Absolute(raw) => {
                LayerError::Refused(format!("entry {raw:?} has an absolute path"))
            }
            WalkError::ClimbsOut(raw) => {
                LayerError::Refused(format!("entry {raw:?} climbs out of the image with .."))
            }
            WalkError::Truncated { path, got, size } => LayerError::Corrupt(format!(
                "truncated: entry {path:?} has {got} of its {size} bytes"
            )),
        }
    }
}

/// What an entry costs besides its path, content and link target: the map's own bookkeeping.
/// Counted so that a layer of millions of empty files or directories is bounded too.
const ENTRY_COST: u64 = 64;

#[derive(Debug, Clone)]
enum Node {
    Dir,
    File(Vec<u8>),
    /// A link, by its target's path from the image root.
    Symlink(String),
}

#[derive(Debug, Clone)]
struct Entry {
    node: Node,
    /// The layer that wrote it: whiteouts remove only what lower layers wrote.
    layer: usize,
}

/// The configs directory of an image, built layer by layer.
#[derive(Debug)]
pub struct ImageFs {
    /// The configs directory, from the image root, without leading or trailing slashes.
    root: String,
    /// What lies at or under `root`, by path from the image root.
    entries: BTreeMap<String, Entry>,
    /// Bytes kept: file contents, paths, link targets and [`ENTRY_COST`] per entry.
    kept: u64,
    max_bytes: u64,
    /// When unpacking must stop (the pull's deadline): unpacking runs on a blocking thread,
    /// which a timeout cannot cancel.
    deadline: Option<std::time::Instant>,
    /// A symlink at `root` or one of its ancestors, which catalogd does not follow.
    link_on_path: Option<String>,
}

impl ImageFs {
    /// An empty file system whose configs directory is `configs_dir` (the image's label, such
    /// as `/configs`), keeping at most `max_bytes` of content.
    pub fn new(configs_dir: &str, max_bytes: u64) -> Result<Self, LayerError> {
        let root = normalize("", configs_dir.trim_start_matches('/')).ok_or_else(|| {
            LayerError::Refused(format!(
                "the configs directory {configs_dir:?} climbs out of the image with .."
            ))
        })?;
        Ok(Self {
            root,
            entries: BTreeMap::new(),
            kept: 0,
            max_bytes,
            deadline: None,
            link_on_path: None,
        })
    }

    /// Stops applying layers at `deadline` ([`LayerError::TimedOut`]).
    pub fn with_deadline(mut self, deadline: std::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Applies layer `index` (0 is the base), read from `layer` (a tar, plain or compressed),
    /// unpacking at most `max_layer_bytes` of tar.
    pub fn apply(
        &mut self,
        index: usize,
        layer: impl Read,
        max_layer_bytes: u64,
    ) -> Result<(), LayerError> {
        let mut buffered = BufReader::new(layer);
        let magic = buffered
            .fill_buf()
            .map_err(|e| LayerError::Corrupt(format!("reading the layer: {e}")))?;
        let tar: Box<dyn Read + '_> = if magic.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(buffered)
                .map_err(|e| LayerError::Corrupt(format!("reading the zstd layer: {e}")))?;
            // A frame names its window (up to 2 GiB with --long): the decoder allocates it. At
            // most ZSTD_WINDOW_LOG_MAX, what zstd's levels use by default; a layer that needs
            // more fails instead of taking the memory.
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(|e| LayerError::Corrupt(format!("reading the zstd layer: {e}")))?;
            Box::new(decoder)
        } else {
            Box::new(buffered)
        };
        let mut limited = Limited {
            inner: tar,
            left: max_layer_bytes,
            exceeded: false,
        };
        let result = self.apply_tar(index, &mut limited);
        if limited.exceeded {
            return Err(LayerError::TooLarge(format!(
                "unpacks to more than {max_layer_bytes} bytes"
            )));
        }
        result
    }

    fn apply_tar(&mut self, index: usize, tar: &mut dyn Read) -> Result<(), LayerError> {
        walk(tar, |item| self.apply_entry(index, item))
    }

    /// One entry of layer `index`, its path checked by the walk.
    fn apply_entry(
        &mut self,
        index: usize,
        item: Item<'_, &mut dyn Read>,
    ) -> Result<(), LayerError> {
        if self.deadline.is_some_and(|d| std::time::Instant::now() > d) {
            return Err(LayerError::TimedOut);
        }
        let path = item.path.clone();
        if path.is_empty() {
            return Ok(());
        }
        let name = path.rsplit('/').next().unwrap_or_default();
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            let dir = parent(&path);
            if name == OPAQUE {
                self.opaque(dir, index);
            } else if !hidden.starts_with(WHITEOUT) {
                // `.wh..wh.*` other than the opaque marker is AUFS bookkeeping.
                self.remove(&join(dir, hidden), index);
            }
            return Ok(());
        }
        match &item.kind {
            Kind::Symlink(target) | Kind::HardLink(target) => {
                let symlink = matches!(item.kind, Kind::Symlink(_));
                // A symlink is relative to its directory, or absolute from the image root; a
                // hard link names a path in the image.
                let base = if symlink && !target.starts_with('/') {
                    parent(&path)
                } else {
                    ""
                };
                let resolved =
                    normalize(base, target.trim_start_matches('/')).ok_or_else(|| {
                        LayerError::Refused(format!(
                            "entry {path:?} links to {target:?}, outside the image"
                        ))
                    })?;
                if symlink {
                    self.put_symlink(&path, resolved, index)
                } else {
                    self.put_hard_link(&path, &resolved, index)
                }
            }
            Kind::Dir => self.put(&path, Node::Dir, index),
            Kind::File if !self.inside(&path) => {
                // Not ours: it still replaces whatever was at its path.
                self.replace_outside(&path);
                Ok(())
            }
            Kind::File => {
                if self
                    .kept_without(&path)
                    .saturating_add(ENTRY_COST + path.len() as u64)
                    .saturating_add(item.size())
                    > self.max_bytes
                {
                    return Err(self.too_large());
                }
                let content = item.read()?;
                self.put(&path, Node::File(content), index)
            }
            // Devices, fifos and the like mean nothing to a catalog.
            Kind::Other => Ok(()),
        }
    }

    fn inside(&self, path: &str) -> bool {
        within(path, &self.root)
    }

    /// Whether `path` is a strict ancestor of the configs directory.
    fn above(&self, path: &str) -> bool {
        path != self.root && within(&self.root, path)
    }

    /// What `path` and its entry cost.
    fn cost(path: &str, node: &Node) -> u64 {
        ENTRY_COST
            + path.len() as u64
            + match node {
                Node::Dir => 0,
                Node::File(c) => c.len() as u64,
                Node::Symlink(t) => t.len() as u64,
            }
    }

    /// What is kept, less the entry at `path`.
    fn kept_without(&self, path: &str) -> u64 {
        let old = self
            .entries
            .get(path)
            .map_or(0, |e| Self::cost(path, &e.node));
        self.kept - old
    }

    fn too_large(&self) -> LayerError {
        LayerError::TooLarge(format!(
            "the content under /{} is larger than {} bytes",
            self.root, self.max_bytes
        ))
    }

    /// A non-directory written outside the configs directory: if it sits on the directory's
    /// path, the directory is gone.
    fn replace_outside(&mut self, path: &str) {
        if self.above(path) {
            self.clear_under(path, None);
        }
    }

    fn put(&mut self, path: &str, node: Node, layer: usize) -> Result<(), LayerError> {
        if !self.inside(path) {
            if self.above(path) {
                match node {
                    // A directory on the path replaces a symlink that was there.
                    Node::Dir => {
                        if self.link_on_path.as_deref() == Some(path) {
                            self.link_on_path = None;
                        }
                    }
                    _ => self.clear_under(path, None),
                }
            }
            return Ok(());
        }
        self.refuse_through_link(path)?;
        // Whatever is written under the configs directory implies it, in this layer (so that
        // an opaque whiteout later in the layer spares it).
        match self.entries.get_mut(&self.root) {
            Some(e) => e.layer = e.layer.max(layer),
            None if path != self.root => {
                let root = self.root.clone();
                self.insert(root, Node::Dir, layer)?;
            }
            None => {}
        }
        // A non-directory replaces a directory and all it held; a directory merges.
        if !matches!(node, Node::Dir) {
            self.clear_under(path, None);
        } else if matches!(self.entries.get(path).map(|e| &e.node), Some(Node::Dir)) {
            return Ok(());
        }
        if path == self.root {
            self.link_on_path = match node {
                Node::Symlink(_) => Some(path.to_owned()),
                _ => None,
            };
        }
        self.insert(path.to_owned(), node, layer)
    }

    /// Inserts an entry, within the limit.
    fn insert(&mut self, path: String, node: Node, layer: usize) -> Result<(), LayerError> {
        let kept = self.kept_without(&path) + Self::cost(&path, &node);
        if kept > self.max_bytes {
            return Err(self.too_large());
        }
        self.kept = kept;
        self.entries.insert(path, Entry { node, layer });
        Ok(())
    }

    fn put_symlink(&mut self, path: &str, target: String, layer: usize) -> Result<(), LayerError> {
        if self.above(path) {
            // catalogd reads the configs directory where the label says it is, and does not
            // chase it through links.
            self.clear_under(path, None);
            self.link_on_path = Some(path.to_owned());
            return Ok(());
        }
        self.put(path, Node::Symlink(target), layer)
    }

    fn put_hard_link(&mut self, path: &str, target: &str, layer: usize) -> Result<(), LayerError> {
        if !self.inside(path) {
            self.replace_outside(path);
            return Ok(());
        }
        match self.entries.get(target).map(|e| e.node.clone()) {
            Some(Node::File(content)) => self.put(path, Node::File(content), layer),
            _ if !self.inside(target) => Err(LayerError::Refused(format!(
                "entry {path:?} is a hard link to {target:?}, outside /{}",
                self.root
            ))),
            // A hard link to nothing (or to a directory) is a broken archive; it adds nothing.
            _ => Ok(()),
        }
    }

    /// Refuses an entry written through a symlink inside the configs directory.
    fn refuse_through_link(&self, path: &str) -> Result<(), LayerError> {
        let mut dir = parent(path);
        while !dir.is_empty() && self.inside(dir) {
            if let Some(Entry {
                node: Node::Symlink(_),
                ..
            }) = self.entries.get(dir)
            {
                return Err(LayerError::Refused(format!(
                    "entry {path:?} is written through the symlink {dir:?}"
                )));
            }
            dir = parent(dir);
        }
        Ok(())
    }

    /// A whiteout of `path` in `layer`: what lower layers wrote there is gone.
    fn remove(&mut self, path: &str, layer: usize) {
        if self.inside(path) || self.above(path) {
            self.clear_under(path, Some(layer));
            if self.link_on_path.as_deref() == Some(path) {
                self.link_on_path = None;
            }
        }
    }

    /// An opaque whiteout of `dir` in `layer`: what lower layers put under it is gone.
    fn opaque(&mut self, dir: &str, layer: usize) {
        if self.inside(dir) || within(&self.root, dir) {
            let lower: Vec<String> = self
                .under(dir)
                .filter(|(p, e)| *p != dir && e.layer < layer)
                .map(|(p, _)| p.to_owned())
                .collect();
            self.drop_all(&lower);
            if self
                .link_on_path
                .as_deref()
                .is_some_and(|l| l != dir && within(l, dir))
            {
                self.link_on_path = None;
            }
        }
    }

    /// The entries at `path` and under it (all of them, when `path` is the image root), found
    /// by range, not by a scan: a layer of many entries stays linear, however many siblings
    /// share a prefix.
    fn under<'a>(&'a self, path: &'a str) -> Box<dyn Iterator<Item = (&'a str, &'a Entry)> + 'a> {
        if path.is_empty() {
            return Box::new(self.entries.iter().map(|(p, e)| (p.as_str(), e)));
        }
        // Children sort from `path/` up to, not including, `path0` ('0' follows '/').
        let children = self
            .entries
            .range::<String, _>(format!("{path}/")..format!("{path}0"))
            .map(|(p, e)| (p.as_str(), e));
        Box::new(
            self.entries
                .get_key_value(path)
                .map(|(p, e)| (p.as_str(), e))
                .into_iter()
                .chain(children),
        )
    }

    /// Removes `path` and everything under it (all of it, when `path` is above the configs
    /// directory); only what layers below `below` wrote, when given.
    fn clear_under(&mut self, path: &str, below: Option<usize>) {
        let doomed: Vec<String> = self
            .under(path)
            .filter(|(_, e)| below.is_none_or(|l| e.layer < l))
            .map(|(p, _)| p.to_owned())
            .collect();
        self.drop_all(&doomed);
    }

    fn drop_all(&mut self, paths: &[String]) {
        for p in paths {
            if let Some(e) = self.entries.remove(p) {
                self.kept -= Self::cost(p, &e.node);
            }
        }
    }

    /// The catalog's files, by path under the configs directory, in path order: symlinks
    /// stand for their target's content.
    pub fn into_files(self) -> Result<Vec<(String, Vec<u8>)>, LayerError> {
        self.into_tree().map(|(_, files)| files)
    }

    /// As [`ImageFs::into_files`], with the directories below the configs directory too (a
    /// bundle's empty `manifests/` is not the same as none), in path order.
    pub fn into_tree(self) -> Result<super::Unpacked, LayerError> {
        if let Some(link) = &self.link_on_path {
            return Err(LayerError::Refused(format!(
                "/{link} is a symlink; /{} is read only as a real directory",
                self.root
            )));
        }
        if let Some(Node::File(_)) = self.entries.get(&self.root).map(|e| &e.node) {
            return Err(LayerError::Refused(format!(
                "/{} is a file, not the directory of a catalog",
                self.root
            )));
        }
        if !self.entries.contains_key(&self.root) {
            return Err(LayerError::Refused(format!(
                "the image has no /{} directory (the label operators.operatorframework.io.index.configs.v1 names it; a whiteout may have removed it)",
                self.root
            )));
        }
        // Links first, copying their targets' content; then files are moved out, not copied
        // (the catalog is held once).
        let mut total = self.kept;
        let mut linked: Vec<(String, Vec<u8>)> = Vec::new();
        for (path, entry) in &self.entries {
            if let Node::Symlink(target) = &entry.node
                && let Some(c) = self.follow(path, target)?
            {
                total += c.len() as u64;
                if total > self.max_bytes {
                    return Err(self.too_large());
                }
                linked.push((path.clone(), c.clone()));
            }
        }
        let root = self.root;
        let relative = |path: String| {
            path.strip_prefix(&root)
                .unwrap_or(&path)
                .trim_start_matches('/')
                .to_owned()
        };
        let mut dirs = Vec::new();
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for (path, entry) in self.entries {
            match entry.node {
                Node::File(c) => files.push((path, c)),
                Node::Dir if path != root => dirs.push(relative(path)),
                _ => {}
            }
        }
        let mut files: Vec<(String, Vec<u8>)> = files
            .into_iter()
            .chain(linked)
            .map(|(path, c)| (relative(path), c))
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        dirs.sort();
        Ok((dirs, files))
    }

    /// The content a symlink stands for: a file in the configs directory, or nothing (a link
    /// to a directory or to nothing).
    fn follow(&self, path: &str, target: &str) -> Result<Option<&Vec<u8>>, LayerError> {
        let mut target = target.to_owned();
        for _ in 0..MAX_LINK_HOPS {
            if !self.inside(&target) {
                return Err(LayerError::Refused(format!(
                    "entry {path:?} links to /{target}, outside /{}",
                    self.root
                )));
            }
            match self.entries.get(&target).map(|e| &e.node) {
                Some(Node::Symlink(next)) => target = next.clone(),
                Some(Node::File(c)) => return Ok(Some(c)),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// Whether `path` is `dir` or lies under it ("" is the image root).
fn within(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// A reader that stops with an error past `left` bytes.
struct Limited<R> {
    inner: R,
    left: u64,
    exceeded: bool,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.exceeded = true;
            return Err(std::io::Error::other("layer over the size limit"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar::EntryType;

    use olm_testkit::tar_archive::{file, gzip, symlink, tar};

    type E = olm_testkit::tar_archive::Entry<'static>;

    fn dir(path: &'static str) -> E {
        (path, EntryType::Directory, b"", "")
    }
    fn whiteout(path: &'static str) -> E {
        (path, EntryType::Regular, b"", "")
    }

    fn build(layers: &[Vec<E>]) -> Result<Vec<(String, String)>, LayerError> {
        build_in("/configs", layers, 1 << 20)
    }

    fn build_in(
        configs: &str,
        layers: &[Vec<E>],
        max: u64,
    ) -> Result<Vec<(String, String)>, LayerError> {
        let mut fs = ImageFs::new(configs, max)?;
        for (i, layer) in layers.iter().enumerate() {
            fs.apply(i, gzip(&tar(layer)).as_slice(), max)?;
        }
        Ok(fs
            .into_files()?
            .into_iter()
            .map(|(p, c)| (p, String::from_utf8(c).unwrap()))
            .collect())
    }

    fn names(files: &[(String, String)]) -> Vec<&str> {
        files.iter().map(|(p, _)| p.as_str()).collect()
    }

    #[test]
    fn layers_stack_and_only_the_configs_directory_is_kept() {
        let files = build(&[
            vec![
                dir("bin"),
                file("bin/opm", b"ELF"),
                dir("configs"),
                file("configs/a/catalog.json", b"a1"),
            ],
            vec![
                file("./configs/a/catalog.json", b"a2"),
                file("configs/b.yaml", b"b"),
            ],
        ])
        .unwrap();
        assert_eq!(
            files,
            [
                ("a/catalog.json".into(), "a2".into()),
                ("b.yaml".into(), "b".into())
            ]
        );
    }

    #[test]
    fn whiteouts_remove_what_lower_layers_wrote() {
        let files = build(&[
            vec![file("configs/a.json", b"a"), file("configs/d/x.json", b"x")],
            vec![whiteout("configs/.wh.a.json"), whiteout("configs/.wh.d")],
        ])
        .unwrap();
        assert!(files.is_empty(), "{files:?}");
    }

    #[test]
    fn a_whiteout_spares_what_its_own_layer_wrote() {
        let files = build(&[vec![
            file("configs/a.json", b"a"),
            whiteout("configs/.wh.a.json"),
        ]])
        .unwrap();
        assert_eq!(names(&files), ["a.json"]);
    }

    #[test]
    fn an_opaque_root_spares_the_configs_its_own_layer_wrote() {
        let files = build(&[
            vec![dir("configs"), file("configs/old.json", b"o")],
            vec![
                dir("configs"),
                file("configs/new.json", b"n"),
                whiteout(".wh..wh..opq"),
            ],
        ])
        .unwrap();
        assert_eq!(names(&files), ["new.json"]);
    }

    #[test]
    fn many_empty_entries_count_towards_the_limit() {
        let paths: Vec<String> = (0..20_000).map(|i| format!("configs/d/f{i:06}")).collect();
        let mut tar_entries: Vec<E> = Vec::new();
        for p in &paths {
            let p: &'static str = Box::leak(p.clone().into_boxed_str());
            tar_entries.push(file(p, b""));
        }
        let err = build_in("/configs", &[tar_entries], 1 << 20).unwrap_err();
        assert!(matches!(err, LayerError::TooLarge(_)), "{err}");
    }

    #[test]
    fn unpacking_stops_at_the_deadline() {
        let past = std::time::Instant::now() - std::time::Duration::from_secs(1);
        let mut fs = ImageFs::new("/configs", 1 << 20)
            .unwrap()
            .with_deadline(past);
        let layer = gzip(&tar(&[file("configs/a.json", b"{}")]));
        assert_eq!(
            fs.apply(0, layer.as_slice(), 1 << 20),
            Err(LayerError::TimedOut)
        );
    }

    #[test]
    fn an_opaque_directory_hides_lower_layers_but_not_its_own() {
        let files = build(&[
            vec![file("configs/old.json", b"o")],
            vec![
                file("configs/new.json", b"n"),
                whiteout("configs/.wh..wh..opq"),
            ],
        ])
        .unwrap();
        assert_eq!(names(&files), ["new.json"]);
    }

    #[test]
    fn a_whiteout_of_the_configs_directory_leaves_no_catalog() {
        let err = build(&[
            vec![file("configs/a.json", b"a")],
            vec![whiteout(".wh.configs")],
        ])
        .unwrap_err();
        assert!(err.to_string().contains("no /configs directory"), "{err}");
        let opaque_root = build(&[
            vec![file("configs/a.json", b"a")],
            vec![whiteout(".wh..wh..opq"), file("etc/x", b"")],
        ])
        .unwrap_err();
        assert!(
            matches!(opaque_root, LayerError::Refused(_)),
            "{opaque_root}"
        );
        let replaced = build(&[
            vec![file("configs/a.json", b"a")],
            vec![file("configs", b"")],
        ])
        .unwrap_err();
        assert!(replaced.to_string().contains("is a file"), "{replaced}");
    }

    #[test]
    fn the_label_may_name_another_directory() {
        let files = build_in(
            "/data/catalog/",
            &[vec![
                file("configs/ignored.json", b"i"),
                file("data/catalog/p/c.json", b"c"),
            ]],
            1 << 20,
        )
        .unwrap();
        assert_eq!(names(&files), ["p/c.json"]);
        assert!(ImageFs::new("/../etc", 10).is_err());
    }

    #[test]
    fn entries_escaping_the_root_are_refused_anywhere() {
        for (entries, why) in [
            (vec![file("/etc/passwd", b"x")], "absolute path"),
            (vec![file("../x", b"x")], "climbs out"),
            (vec![file("usr/../../x", b"x")], "climbs out"),
            (
                vec![symlink("configs/a.json", "../../etc/passwd")],
                "outside the image",
            ),
            (
                vec![symlink("usr/lib/x", "../../../../y")],
                "outside the image",
            ),
            (
                vec![("configs/h.json", EntryType::Link, b"" as &[u8], "../x")],
                "outside the image",
            ),
        ] {
            let err = build(&[entries]).unwrap_err();
            assert!(matches!(err, LayerError::Refused(_)), "{err}");
            assert!(err.to_string().contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn links_must_stay_in_the_configs_directory() {
        let files = build(&[vec![
            file("configs/real.json", b"r"),
            symlink("configs/alias.json", "real.json"),
            symlink("configs/abs.json", "/configs/real.json"),
            (
                "configs/hard.json",
                EntryType::Link,
                b"",
                "configs/real.json",
            ),
            symlink("configs/dangling.json", "nothing.json"),
            symlink("bin/sh", "/usr/bin/dash"),
        ]])
        .unwrap();
        assert_eq!(
            names(&files),
            ["abs.json", "alias.json", "hard.json", "real.json"]
        );
        assert!(files.iter().all(|(_, c)| c == "r"));

        for entries in [
            vec![symlink("configs/pw.json", "/etc/passwd")],
            vec![
                file("etc/x", b"x"),
                ("configs/h.json", EntryType::Link, b"" as &[u8], "etc/x"),
            ],
        ] {
            let err = build(&[entries]).unwrap_err();
            assert!(err.to_string().contains("outside /configs"), "{err}");
        }
        let err = build(&[vec![symlink("configs", "/srv")]]).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
        let err = build(&[vec![
            symlink("configs/d", "/tmp"),
            file("configs/d/x.json", b"x"),
        ]])
        .unwrap_err();
        assert!(err.to_string().contains("through the symlink"), "{err}");
    }

    #[test]
    fn sizes_are_limited_per_layer_and_in_all() {
        static BIG: [u8; 4096] = [b' '; 4096];
        let err = build_in("/configs", &[vec![file("configs/a.json", &BIG)]], 3000).unwrap_err();
        assert!(matches!(err, LayerError::TooLarge(_)), "{err}");
        // A layer that unpacks past the limit stops, even if nothing of it is kept.
        let mut fs = ImageFs::new("/configs", 1 << 20).unwrap();
        let layer = gzip(&tar(&[file("bin/big", &BIG)]));
        let err = fs.apply(0, layer.as_slice(), 2048).unwrap_err();
        assert!(err.to_string().contains("more than 2048 bytes"), "{err}");
        // Replacing a file frees its bytes.
        let files = build_in(
            "/configs",
            &[
                vec![file("configs/a.json", &BIG)],
                vec![file("configs/a.json", &BIG)],
            ],
            6000,
        )
        .unwrap();
        assert_eq!(names(&files), ["a.json"]);
    }

    #[test]
    fn plain_gzip_and_zstd_layers_are_read() {
        let layer = tar(&[file("configs/a.json", b"{}")]);
        for bytes in [
            layer.clone(),
            gzip(&layer),
            zstd::encode_all(layer.as_slice(), 3).unwrap(),
        ] {
            let mut fs = ImageFs::new("/configs", 1 << 20).unwrap();
            fs.apply(0, bytes.as_slice(), 1 << 20).unwrap();
            assert_eq!(
                fs.into_files().unwrap(),
                [("a.json".to_owned(), b"{}".to_vec())]
            );
        }
        let mut fs = ImageFs::new("/configs", 1 << 20).unwrap();
        let err = fs
            .apply(0, &gzip(b"not a tar at all, surely")[..], 1 << 20)
            .unwrap_err();
        assert!(matches!(err, LayerError::Corrupt(_)), "{err}");
    }

    /// A zstd frame may ask for a window of up to 2 GiB, which the decoder would allocate: one
    /// above 8 MiB is refused.
    #[test]
    fn a_zstd_layer_with_a_huge_window_is_refused() {
        let layer = tar(&[file("configs/a.json", b"{}")]);
        let encode = |window_log: u32| {
            let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            encoder.long_distance_matching(true).unwrap();
            encoder.window_log(window_log).unwrap();
            // The frame header names the window only when the size is unknown.
            encoder.include_contentsize(false).unwrap();
            std::io::Write::write_all(&mut encoder, &layer).unwrap();
            encoder.finish().unwrap()
        };
        let mut fs = ImageFs::new("/configs", 1 << 20).unwrap();
        fs.apply(0, encode(ZSTD_WINDOW_LOG_MAX).as_slice(), 1 << 20)
            .unwrap();
        let mut fs = ImageFs::new("/configs", 1 << 20).unwrap();
        let err = fs.apply(0, encode(27).as_slice(), 1 << 20).unwrap_err();
        assert!(matches!(err, LayerError::Corrupt(_)), "{err}");
    }
}
