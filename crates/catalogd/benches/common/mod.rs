//! What the benchmarks share: this process's memory, from /proc/self/status.
#![allow(dead_code)] // each benchmark uses its part

/// A field of /proc/self/status (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0: `5` to clear_refs), so a
/// peak measured next is the next work's alone; whether it could.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
