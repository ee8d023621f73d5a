//! What the benchmarks share: this process's memory (the e2e harness's, which the memory-bound
//! tests use too).
#![allow(dead_code, unused_imports)] // each benchmark uses its part

pub use olm_testkit::memory::{reset_peak, status_kib};
