//! Memory of reading a hostile YAML catalog file, in a test binary of its own (so that nothing
//! else runs in the process whose peak memory it measures): one line, then 64 MiB of newlines.
//! A table of every line took 40 bytes a line (2.1 GB here, where catalogd's unpack budget
//! assumes ten times the content); read one at a time, the lines cost nothing beyond the text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use olm_resolver::fbc::decode::yaml_documents;

/// The size of the file.
const NEWLINES: usize = 64 << 20;
/// What reading it may add to the peak: a fraction of the file itself.
const MAX_RISE_KIB: u64 = 16 << 10;

#[test]
fn a_file_of_newlines_is_read_without_a_table_of_its_lines() {
    let mut text = String::from("schema: olm.package\nname: p\n");
    text.extend(std::iter::repeat_n('\n', NEWLINES));
    let (rise, docs) = olm_testkit::memory::peak_rise(|| yaml_documents(text.as_bytes()));
    let docs = docs.unwrap();
    assert_eq!(docs.iter().count(), 1);
    let rise = rise.expect("this kernel resets the peak (clear_refs 5)");
    eprintln!("yaml: 64 MiB of newlines read; peak memory rose by {rise} KiB");
    assert!(
        rise < MAX_RISE_KIB,
        "peak memory rose by {rise} KiB, more than {MAX_RISE_KIB}"
    );
}
