//! An error with its causes on one line, for a log field or an event note.

/// `error: cause: cause…` on one line, for a log field or an event note; `Display` alone
/// shows only the outermost message.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
