//! A fetched body as catalog files: a gzip body is a tar archive of an FBC directory; anything
//! else is a single FBC file. Archives are untrusted: entries that would escape the catalog
//! (absolute paths, `..`, links pointing outside it) are refused, links inside it stand for
//! their target's content, and the unpacked size is limited.

use std::collections::BTreeMap;
use std::io::Read;

use crate::contract::{SourceError, reasons, too_large};
use olm_puller::paths::{normalize, parent};
use olm_puller::tar_walk::{Kind, WalkError, walk};

/// Links followed one after the other before giving up (a loop, or an absurd chain).
const MAX_LINK_HOPS: usize = 8;

/// Why the walk of an archive stopped: the walk's own refusal, or a link out of the catalog
/// (the raw path, and how it escapes).
enum Refused {
    Walk(WalkError),
    Escapes(String, String),
}

impl From<WalkError> for Refused {
    fn from(e: WalkError) -> Self {
        Refused::Walk(e)
    }
}

/// The body as `(path, bytes)` files, in walk (path) order. `url` names the source in messages.
pub fn files(
    url: &str,
    body: Vec<u8>,
    max_bytes: u64,
) -> Result<Vec<(String, Vec<u8>)>, SourceError> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        if body.starts_with(b"PK\x03\x04") || body.get(257..262) == Some(b"ustar") {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "{url} is a zip or an uncompressed tar archive; serve an FBC file or a .tar.gz"
                ),
            ));
        }
        let name = url
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
            .unwrap_or("catalog")
            .to_owned();
        return Ok(vec![(name, body)]);
    }
    let archive_error = |e: std::io::Error| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!("{url} is gzip, but not a readable .tar.gz: {e}"),
        )
    };
    let escapes = |path: &str, why: &str| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!(
                "{url}: archive entry {path:?} {why}, outside the catalog; refusing the archive"
            ),
        )
    };
    // Every gzip member (bgzip and concatenated files have several), and a limit on the
    // unpacked size too, so a small archive cannot expand without bound.
    let mut tarball = Vec::new();
    flate2::read::MultiGzDecoder::new(body.as_slice())
        .take(max_bytes + 1)
        .read_to_end(&mut tarball)
        .map_err(archive_error)?;
    drop(body);
    if tarball.len() as u64 > max_bytes {
        return Err(too_large(url, max_bytes, "the unpacked archive"));
    }
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut links: Vec<(String, String)> = Vec::new();
    let walked = walk(tarball.as_slice(), |item| {
        let (symlink, target) = match &item.kind {
            Kind::Symlink(t) => (true, t.clone()),
            Kind::HardLink(t) => (false, t.clone()),
            Kind::File => {
                let path = item.path.clone();
                files.insert(path, item.read()?);
                return Ok(());
            }
            Kind::Dir | Kind::Other => return Ok(()),
        };
        // A symlink is relative to its own directory; a hard link names an archive path.
        let base = if symlink { parent(&item.path) } else { "" };
        if target.starts_with('/') {
            return Err(Refused::Escapes(
                item.raw,
                format!("links to the absolute path {target:?}"),
            ));
        }
        let Some(resolved) = normalize(base, &target) else {
            return Err(Refused::Escapes(item.raw, format!("links to {target:?}")));
        };
        links.push((item.path, resolved));
        Ok(())
    });
    walked.map_err(|refused| match refused {
        Refused::Walk(WalkError::Unreadable(e)) => archive_error(e),
        Refused::Walk(WalkError::Absolute(raw)) => escapes(&raw, "has an absolute path"),
        Refused::Walk(WalkError::ClimbsOut(raw)) => escapes(&raw, "climbs out with .."),
        Refused::Walk(WalkError::Truncated { path, got, size }) => SourceError::new(
            reasons::UNPACK_FAILED,
            format!("{url} is truncated: archive entry {path:?} has {got} of its {size} bytes"),
        ),
        Refused::Escapes(raw, why) => escapes(&raw, &why),
    })?;
    drop(tarball);
    // Links inside the catalog stand for their target's content (a link to a directory, or
    // nothing, adds nothing); they count towards the size limit like any file.
    let mut total: u64 = files.values().map(|c| c.len() as u64).sum();
    resolve_links(&mut files, &links, |bytes| {
        total += bytes;
        if total > max_bytes {
            Err(too_large(url, max_bytes, "the unpacked archive"))
        } else {
            Ok(())
        }
    })?;
    Ok(files.into_iter().collect())
}

/// Gives each link (path, normalized target) its target's content, following chains of links
/// up to [`MAX_LINK_HOPS`]; a link to a directory or to nothing adds nothing. `charge` is told
/// each copy's size and may refuse it. Linear in the links (a map, not a scan per link), so a
/// catalog of millions of links costs no more than its size.
pub(crate) fn resolve_links<E>(
    files: &mut BTreeMap<String, Vec<u8>>,
    links: &[(String, String)],
    mut charge: impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    let targets: std::collections::HashMap<&str, &str> = links
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    for (path, target) in links {
        let mut target = target.as_str();
        for _ in 0..MAX_LINK_HOPS {
            match targets.get(target) {
                Some(next) => target = next,
                None => break,
            }
        }
        if let Some(content) = files.get(target).cloned() {
            charge(content.len() as u64)?;
            files.insert(path.clone(), content);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use olm_testkit::tar_archive::{file, gzip, symlink, tar};

    fn tar_gz(entries: &[olm_testkit::tar_archive::Entry<'_>]) -> Vec<u8> {
        gzip(&tar(entries))
    }

    #[test]
    fn a_tar_gz_becomes_files_in_walk_order() {
        let body = tar_gz(&[file("./b/catalog.yaml", b"b"), file("a.json", b"a")]);
        assert_eq!(
            files("u", body, 1 << 20).unwrap(),
            vec![
                ("a.json".into(), b"a".to_vec()),
                ("b/catalog.yaml".into(), b"b".to_vec())
            ]
        );
    }

    #[test]
    fn an_archive_that_expands_past_the_limit_is_too_large() {
        let big = vec![b' '; 100_000];
        let body = tar_gz(&[("big.json", tar::EntryType::Regular, &big, "")]);
        let err = files("u", body, 50_000).unwrap_err();
        assert_eq!(err.reason, reasons::CONTENT_TOO_LARGE);
        assert!(err.message.contains("unpacked archive"), "{}", err.message);
    }

    #[test]
    fn a_truncated_archive_fails() {
        let data = vec![b'x'; 10_000];
        let mut body = tar_gz(&[("a.json", tar::EntryType::Regular, &data, "")]);
        body.truncate(body.len() / 2);
        assert_eq!(
            files("u", body, 1 << 20).unwrap_err().reason,
            reasons::UNPACK_FAILED
        );
    }

    #[test]
    fn entries_escaping_the_catalog_are_refused() {
        for (entries, why) in [
            (vec![file("../x", b"x")], "climbs out with .."),
            (vec![file("a/../../x", b"x")], "climbs out with .."),
            (vec![file("/etc/passwd", b"x")], "has an absolute path"),
            (
                vec![symlink("a.json", "/etc/passwd")],
                "links to the absolute path",
            ),
            (
                vec![symlink("dir/a.json", "../../secret")],
                "links to \"../../secret\"",
            ),
            (
                vec![("h.json", tar::EntryType::Link, b"" as &[u8], "../outside")],
                "links to",
            ),
        ] {
            let err = files("u", tar_gz(&entries), 1 << 20).unwrap_err();
            assert_eq!(err.reason, reasons::UNPACK_FAILED);
            assert!(err.message.contains(why), "{why}: {}", err.message);
            assert!(
                err.message.contains("outside the catalog"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn links_inside_the_catalog_stand_for_their_target() {
        let body = tar_gz(&[
            file("real/catalog.json", b"{}"),
            symlink("alias/catalog.json", "../real/catalog.json"),
            symlink("chain.json", "alias/catalog.json"),
            symlink("dangling.json", "missing.json"),
            ("hard.json", tar::EntryType::Link, b"", "real/catalog.json"),
        ]);
        let names: Vec<String> = files("u", body, 1 << 20)
            .unwrap()
            .into_iter()
            .map(|(n, c)| {
                assert_eq!(c, b"{}");
                n
            })
            .collect();
        assert_eq!(
            names,
            [
                "alias/catalog.json",
                "chain.json",
                "hard.json",
                "real/catalog.json"
            ]
        );
    }

    #[test]
    fn a_long_chain_of_links_resolves_within_the_hop_limit() {
        let mut files = BTreeMap::from([("f".to_owned(), b"x".to_vec())]);
        // A chain of 200 000 links, each to the next: with a scan per link this test would run
        // for minutes (no timing is asserted; the figures belong to benchmarks).
        let links: Vec<(String, String)> = (0..200_000)
            .map(|i| {
                (
                    format!("l{i}"),
                    if i == 199_999 {
                        "f".into()
                    } else {
                        format!("l{}", i + 1)
                    },
                )
            })
            .collect();
        resolve_links(&mut files, &links, |_| Ok::<(), ()>(())).unwrap();
        // Only the links within 8 hops of the file reach it: the last link and the 8 before it.
        assert_eq!(files.len(), 1 + 9);
    }

    #[test]
    fn links_count_towards_the_size_limit() {
        let data = vec![b' '; 30_000];
        let body = tar_gz(&[
            ("a.json", tar::EntryType::Regular, &data, ""),
            symlink("b.json", "a.json"),
        ]);
        assert_eq!(
            files("u", body, 50_000).unwrap_err().reason,
            reasons::CONTENT_TOO_LARGE
        );
    }

    #[test]
    fn zips_and_plain_tars_are_named() {
        let err = files("u", b"PK\x03\x04rest".to_vec(), 1 << 20).unwrap_err();
        assert!(err.message.contains("zip"), "{}", err.message);
    }
}
