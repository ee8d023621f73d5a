//! This process's memory, from /proc/self/status: what the benchmarks report, and what the
//! memory-bound tests assert on.

/// A field of /proc/self/status (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, field)
}

/// A field of the status of process `pid` (a manager the harness runs), in KiB.
pub fn process_status_kib(pid: u32, field: &str) -> Option<u64> {
    field_kib(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        field,
    )
}

fn field_kib(status: &str, field: &str) -> Option<u64> {
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

/// Resets the peak RSS of process `pid` (a manager the harness runs); whether it could.
pub fn reset_process_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// How far the peak RSS rose above the RSS of the moment `work` started, in KiB, and what
/// `work` returned. `None` for the rise when the peak cannot be reset here.
pub fn peak_rise<T>(work: impl FnOnce() -> T) -> (Option<u64>, T) {
    let start = status_kib("VmRSS").unwrap_or(0);
    let reset = reset_peak();
    let out = work();
    let peak = status_kib("VmHWM").unwrap_or(0);
    (reset.then(|| peak.saturating_sub(start)), out)
}
