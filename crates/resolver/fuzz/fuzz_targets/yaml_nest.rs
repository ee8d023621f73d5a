//! YAML that nests and repeats, built from tokens: each input byte picks a token of the forms
//! catalogs are written in (indentation, dashes, keys, flow brackets, scalars, comments,
//! document markers), and a byte of 0xE0 and up repeats the token before it up to 32 times, so
//! that a few bytes make deep nesting, long runs of lines, many keys and long scalars. The
//! property is `yaml_json`'s: wherever the fast path reads a file, saphyr reads it too with
//! the same values on the same lines; and neither path outgrows the stack (run it with
//! `ulimit -s 2048`, catalogd's unpack stack).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "yaml_agree.rs"]
mod agree;

const TOKENS: &[&str] = &[
    "- ", "k: ", "\n", "  ", " ", "[", "]", "{", "}", ", ", "x", "'q'", "\"d\\t\"", "|\n",
    "|-\n", "# c", "---\n", "1", ": ", "k2: ", "-\n", "a:\n", "null", "yes", "'", "\"", "\n\n",
    "k", "v1.0.0", "#", "...\n", "? ", "&a ", "*a", ">\n", "1.5", "\\", "k: v\n",
];

fuzz_target!(|data: &[u8]| {
    let mut text = String::new();
    let mut last = "";
    for &b in data {
        if b >= 0xE0 {
            for _ in 0..(b - 0xDF) {
                text.push_str(last);
            }
        } else {
            last = TOKENS[usize::from(b) % TOKENS.len()];
            text.push_str(last);
        }
    }
    agree::check(&text);
});
