//! Paths inside an untrusted tree (an archive, an image, a git commit), as plain strings:
//! joined and normalized without ever climbing above the root. Every walker of such trees
//! uses these, so they agree on what escapes.

/// `path` joined to `base` (a directory inside the catalog, "" for its root) with `.` and `..`
/// resolved; `None` when it climbs above the root.
pub fn normalize(base: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}
