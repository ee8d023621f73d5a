//! Memory bounds of the git source against a hostile repository, in a test binary of its own
//! (so that nothing else runs in the process whose peak memory it measures): a 1 GiB file of
//! zeros beside `catalog/` is a pack of about 1 MiB, and without a bound gix would allocate
//! (and zero) its declared 1 GiB while indexing the pack. It is refused as `ContentTooLarge`
//! before that, and the process's peak memory stays within a few MiB of where it was.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use catalogd_sources::git::remote::{self, Remote};
use catalogd_sources::git::spec::Want;
use olm_puller::network::NetworkPolicy;
use olm_testkit::git::GitServer;

/// The chart's --max-content-bytes.
const MAX_BYTES: u64 = 256 << 20;
/// The bound the issue sets on the rise of the peak.
const MAX_RISE_KIB: u64 = 64 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_pack_declaring_a_huge_object_is_refused_without_allocating_it() {
    olm_testkit::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let server = GitServer::start(&dir.path().join("repos"), None)
        .await
        .unwrap();
    let repo = server.create("zeros").unwrap();
    repo.write_zeros("zeros.bin", 1 << 30).unwrap();
    repo.commit(
        "main",
        &[("catalog/c.yaml", "schema: olm.package\nname: p\n")],
        "a catalog, and 1 GiB of zeros beside it",
    )
    .unwrap();
    let remote = Remote {
        url: server.repo_url("zeros"),
        account: None,
        ssh: None,
        ca: Vec::new(),
        timeout: Duration::from_secs(120),
        shown: server.repo_url("zeros"),
        policy: Arc::new(NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        }),
    };
    let scratch = dir.path().join("scratch");
    let (rise, result) = tokio::task::spawn_blocking(move || {
        olm_testkit::memory::peak_rise(|| {
            remote::fetch(&remote, &Want::Branch("main".into()), &scratch, MAX_BYTES)
                .map(|f| f.bytes)
        })
    })
    .await
    .unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.reason, "ContentTooLarge", "{err}");
    assert!(err.message.contains("--max-content-bytes"), "{err}");
    let rise = rise.expect("this kernel resets the peak (clear_refs 5)");
    eprintln!("git: a 1 GiB object refused; peak memory rose by {rise} KiB");
    assert!(
        rise < MAX_RISE_KIB,
        "peak memory rose by {rise} KiB, more than {MAX_RISE_KIB}"
    );
}
