//! A failed request's error in words: reqwest's error with its causes, so "timed out" or
//! "connection refused" is visible, without the URL (callers name it, redacted).

/// reqwest's error with its causes, so "timed out" or "connection refused" is visible; a
/// timeout names `timeout_flag`, the flag that sets it.
pub fn describe(e: reqwest::Error, timeout_flag: &str) -> String {
    let timeout = e.is_timeout();
    // The URL is named by the caller, redacted.
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if timeout {
        text.push_str(&format!(" (timed out; see {timeout_flag})"));
    }
    text
}
