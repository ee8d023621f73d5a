//! The content store against a real directory.

// Test helpers outside #[test] functions fail loudly too; clippy.toml only exempts the tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::Read;
use std::path::Path;

use catalogd_store::store::{ALL_JSON, ALL_JSON_GZ, Encoding, OWNER, Rendered, Store, StoreError};
use olm_resolver::fbc::{Fbc, load_files};
use serde_json::Value;

const CATALOG_A: &str = r#"
---
schema: olm.package
name: alpha
defaultChannel: stable
---
schema: olm.channel
name: stable
package: alpha
entries:
  - name: alpha.v1.0.0
  - name: alpha.v1.1.0
    replaces: alpha.v1.0.0
---
schema: olm.bundle
name: alpha.v1.0.0
package: alpha
image: example.com/alpha:v1.0.0
properties:
  - type: olm.package
    value: {packageName: alpha, version: 1.0.0}
---
schema: olm.bundle
name: alpha.v1.1.0
package: alpha
image: example.com/alpha:v1.1.0
properties:
  - type: olm.package
    value: {packageName: alpha, version: 1.1.0}
---
schema: example.com/note
package: alpha
name: note
text: "<&> é \u2028"
"#;

const CATALOG_B: &str = r#"
---
schema: olm.package
name: beta
defaultChannel: fast
---
schema: olm.channel
name: fast
package: beta
entries:
  - name: beta.v0.1.0
---
schema: olm.bundle
name: beta.v0.1.0
package: beta
image: example.com/beta:v0.1.0
properties:
  - type: olm.package
    value: {packageName: beta, version: 0.1.0}
"#;

/// The uid of the Catalog the tests store content for.
const UID: &str = "4f7f5f1e-0000-4000-8000-000000000001";

fn fbc(yaml: &str) -> Fbc {
    load_files([("catalog.yaml", yaml.as_bytes())]).unwrap()
}

fn hash_dirs(catalog_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(catalog_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn sorted<const N: usize>(names: [&str; N]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    names
}

fn read_current(store: &Store, catalog: &str, encoding: Encoding) -> Vec<u8> {
    let mut opened = store.open_content(catalog, encoding).unwrap().unwrap();
    let mut bytes = Vec::new();
    opened.file.read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, opened.len);
    bytes
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn put_stores_canonical_content_under_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let fbc = fbc(CATALOG_A);
    let stored = store.put("cat", UID, &fbc).unwrap();
    // The gzip is made in the background.
    store.flush();

    assert_eq!(stored.hash, fbc.content_hash());
    assert_eq!(stored.size, fbc.render().len() as u64);
    assert_eq!(store.current("cat").unwrap(), Some(stored.clone()));

    let hash_dir = dir.path().join("cat").join(&stored.hash);
    assert_eq!(fs::read(hash_dir.join(ALL_JSON)).unwrap(), fbc.render());
    assert_eq!(
        gunzip(&fs::read(hash_dir.join(ALL_JSON_GZ)).unwrap()),
        fbc.render()
    );
    assert_eq!(fs::read_to_string(hash_dir.join(OWNER)).unwrap(), UID);
    assert_eq!(store.owner("cat").unwrap().as_deref(), Some(UID));
    let link = fs::read_link(dir.path().join("cat").join("current")).unwrap();
    assert_eq!(link, Path::new(&stored.hash));

    assert_eq!(
        read_current(&store, "cat", Encoding::Identity),
        fbc.render()
    );
    assert_eq!(
        gunzip(&read_current(&store, "cat", Encoding::Gzip)),
        fbc.render()
    );
    assert_eq!(store.list().unwrap(), vec!["cat".to_owned()]);
}

#[test]
fn index_offsets_slice_all_json_into_exactly_the_blob_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let fbc = fbc(CATALOG_A);
    store.put("cat", UID, &fbc).unwrap();
    let all = fbc.render();
    let lines: Vec<&[u8]> = all.split_inclusive(|b| *b == b'\n').collect();

    // Once from the cache filled by put, once rebuilt from all.json after reopening.
    let reopened = Store::open(dir.path()).unwrap();
    for store in [&store, &reopened] {
        let (stored, index) = store.index("cat").unwrap().unwrap();
        assert_eq!(index.size(), stored.size);
        assert_eq!(index.len(), fbc.blobs.len());
        assert_eq!(index.len(), lines.len());
        let mut joined = Vec::new();
        for (entry, (line, blob)) in index.entries().zip(lines.iter().zip(fbc.blobs.iter())) {
            let start = entry.offset as usize;
            let slice = &all[start..start + entry.length as usize];
            assert_eq!(slice, *line);
            joined.extend_from_slice(slice);
            let value: Value = serde_json::from_slice(slice).unwrap();
            assert_eq!(value, blob.value());
            let field = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default();
            assert_eq!(entry.schema, field("schema"));
            assert_eq!(entry.package, field("package"));
            assert_eq!(entry.name, field("name"));
        }
        assert_eq!(joined, all);
    }
}

#[test]
fn rendered_matches_fbc_render_and_hash() {
    let fbc = fbc(CATALOG_A);
    let rendered = Rendered::from_fbc(&fbc).unwrap();
    assert_eq!(rendered.bytes(), fbc.render().as_slice());
    assert_eq!(rendered.hash(), fbc.content_hash());
}

#[test]
fn new_content_swaps_current_and_removes_the_old_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (a, b) = (fbc(CATALOG_A), fbc(CATALOG_B));
    let first = store.put("cat", UID, &a).unwrap();
    // A reader that opened the old content keeps reading it whole across the swap.
    let mut in_flight = store
        .open_content("cat", Encoding::Identity)
        .unwrap()
        .unwrap();

    let second = store.put("cat", UID, &b).unwrap();
    assert_ne!(first.hash, second.hash);
    assert_eq!(store.current("cat").unwrap(), Some(second.clone()));
    assert_eq!(read_current(&store, "cat", Encoding::Identity), b.render());
    let catalog_dir = dir.path().join("cat");
    assert_eq!(
        hash_dirs(&catalog_dir),
        sorted([second.hash.as_str(), "current"])
    );

    let mut old = Vec::new();
    in_flight.file.read_to_end(&mut old).unwrap();
    assert_eq!(old, a.render());

    // The metas index follows the swap.
    let (_, index) = store.index("cat").unwrap().unwrap();
    assert_eq!(index.size(), b.render().len() as u64);
}

#[test]
fn putting_the_same_content_again_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let fbc = fbc(CATALOG_A);
    let first = store.put("cat", UID, &fbc).unwrap();
    let catalog_dir = dir.path().join("cat");
    let before = hash_dirs(&catalog_dir);
    let mtime = fs::metadata(catalog_dir.join(&first.hash).join(ALL_JSON))
        .unwrap()
        .modified()
        .unwrap();

    let again = store.put("cat", UID, &fbc).unwrap();
    assert_eq!(again, first);
    assert_eq!(hash_dirs(&catalog_dir), before);
    let mtime_after = fs::metadata(catalog_dir.join(&first.hash).join(ALL_JSON))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime_after, mtime);
}

#[test]
fn a_failed_put_keeps_the_last_good_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (a, b) = (fbc(CATALOG_A), fbc(CATALOG_B));
    let good = store.put("cat", UID, &a).unwrap();
    // A regular file where the new content's directory must go makes the rename fail.
    fs::write(dir.path().join("cat").join(b.content_hash()), b"in the way").unwrap();

    assert!(store.put("cat", UID, &b).is_err());
    assert_eq!(store.current("cat").unwrap(), Some(good));
    assert_eq!(read_current(&store, "cat", Encoding::Identity), a.render());
    let leftovers: Vec<String> = hash_dirs(&dir.path().join("cat"))
        .into_iter()
        .filter(|n| n.starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn invalid_names_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let store = Store::open(&root).unwrap();
    let fbc = fbc(CATALOG_B);
    for bad in [
        "",
        "..",
        "../escape",
        "a/b",
        "Upper",
        "-dash",
        "dot.",
        "under_score",
        ".tmp-x",
    ] {
        assert!(
            matches!(
                store.put(bad, UID, &fbc),
                Err(StoreError::InvalidName { .. })
            ),
            "put {bad:?}"
        );
        assert!(
            matches!(store.current(bad), Err(StoreError::InvalidName { .. })),
            "current {bad:?}"
        );
        assert!(
            matches!(store.delete(bad), Err(StoreError::InvalidName { .. })),
            "delete {bad:?}"
        );
    }
    assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn delete_removes_everything_of_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put("one", UID, &fbc(CATALOG_A)).unwrap();
    store.put("two.example", UID, &fbc(CATALOG_B)).unwrap();
    assert_eq!(store.list().unwrap(), vec!["one", "two.example"]);

    store.delete("one").unwrap();
    assert!(!dir.path().join("one").exists());
    assert_eq!(store.current("one").unwrap(), None);
    assert!(store.index("one").unwrap().is_none());
    assert!(
        store
            .open_content("one", Encoding::Identity)
            .unwrap()
            .is_none()
    );
    assert_eq!(store.list().unwrap(), vec!["two.example"]);
    // Only the other catalog is left: no renamed-away directory lingers.
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec!["two.example"]);
    // Deleting what is not there is fine.
    store.delete("one").unwrap();
    store.delete("never").unwrap();
}

#[test]
fn open_cleans_what_a_crash_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let stored = {
        let store = Store::open(dir.path()).unwrap();
        store.put("cat", UID, &fbc(CATALOG_A)).unwrap()
    };
    let catalog_dir = dir.path().join("cat");
    // A half-written content directory, a temporary link, an orphaned hash directory, a
    // root-level leftover of a delete, and a catalog that never got a `current`.
    fs::create_dir(catalog_dir.join(".tmp-x")).unwrap();
    fs::write(catalog_dir.join(".tmp-x").join(ALL_JSON), b"partial").unwrap();
    std::os::unix::fs::symlink("nowhere", catalog_dir.join(".tmp-link-1")).unwrap();
    let orphan = "ab".repeat(32);
    fs::create_dir(catalog_dir.join(&orphan)).unwrap();
    fs::create_dir_all(dir.path().join(".tmp-deleted-1").join("x")).unwrap();
    fs::create_dir_all(dir.path().join("half").join("cd".repeat(32))).unwrap();
    // Not ours: left alone.
    fs::create_dir(dir.path().join("lost+found")).unwrap();

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        hash_dirs(&catalog_dir),
        sorted([stored.hash.as_str(), "current"])
    );
    assert!(!dir.path().join(".tmp-deleted-1").exists());
    assert!(!dir.path().join("half").exists());
    assert!(dir.path().join("lost+found").exists());
    assert_eq!(store.current("cat").unwrap(), Some(stored));
    assert_eq!(store.list().unwrap(), vec!["cat"]);
}

#[test]
fn open_drops_content_links_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus");
    fs::create_dir(&bogus).unwrap();
    std::os::unix::fs::symlink("../../etc", bogus.join("current")).unwrap();
    let dangling = dir.path().join("dangling");
    fs::create_dir(&dangling).unwrap();
    std::os::unix::fs::symlink("ef".repeat(32), dangling.join("current")).unwrap();

    let store = Store::open(dir.path()).unwrap();
    assert!(!bogus.exists());
    assert!(!dangling.exists());
    assert_eq!(store.list().unwrap(), Vec::<String>::new());
    // And both can be stored again.
    store.put("bogus", UID, &fbc(CATALOG_A)).unwrap();
    assert_eq!(
        read_current(&store, "bogus", Encoding::Identity),
        fbc(CATALOG_A).render()
    );
}

#[test]
fn a_link_that_is_not_a_hash_is_reported_and_overwritten_by_put() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put("cat", UID, &fbc(CATALOG_A)).unwrap();
    let current = dir.path().join("cat").join("current");
    fs::remove_file(&current).unwrap();
    std::os::unix::fs::symlink("..", &current).unwrap();

    assert!(matches!(
        store.current("cat"),
        Err(StoreError::Corrupt { .. })
    ));
    assert_eq!(store.list().unwrap(), vec!["cat"]);
    let stored = store.put("cat", UID, &fbc(CATALOG_B)).unwrap();
    assert_eq!(store.current("cat").unwrap(), Some(stored));
}

#[test]
fn readers_racing_puts_always_see_one_whole_content() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let (a, b) = (fbc(CATALOG_A), fbc(CATALOG_B));
    let (ra, rb) = (a.render(), b.render());
    store.put("cat", UID, &a).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Acquire) && reads < 100_000 {
                let bytes = read_current(&store, "cat", Encoding::Identity);
                assert!(bytes == ra || bytes == rb, "read a mix of contents");
                let (stored, index) = store.index("cat").unwrap().unwrap();
                assert_eq!(index.size(), stored.size);
                reads += 1;
            }
            reads
        })
    };
    for i in 0..40 {
        store
            .put("cat", UID, if i % 2 == 0 { &b } else { &a })
            .unwrap();
    }
    done.store(true, Ordering::Release);
    assert!(reader.join().unwrap() > 0);
}

/// A Catalog deleted and created again under the same name is another owner: content it did
/// not store is never passed off as its own, even when it is byte-for-byte the same.
#[test]
fn content_belongs_to_the_uid_that_stored_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = fbc(CATALOG_A);
    let first = store.put("cat", UID, &a).unwrap();
    assert_eq!(store.owner("cat").unwrap().as_deref(), Some(UID));
    let new_uid = "4f7f5f1e-0000-4000-8000-000000000002";
    let second = store.put("cat", new_uid, &a).unwrap();
    assert_eq!(second.hash, first.hash);
    assert_eq!(store.owner("cat").unwrap().as_deref(), Some(new_uid));
    assert_eq!(read_current(&store, "cat", Encoding::Identity), a.render());
    // Reopened, the owner is still the new one.
    let reopened = Store::open(dir.path()).unwrap();
    assert_eq!(reopened.owner("cat").unwrap().as_deref(), Some(new_uid));
    assert_eq!(reopened.owner("none").unwrap(), None);
}
