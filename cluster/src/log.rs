//! The supervisor's log: its stderr, one line a message.

use std::io::Write;

/// One line on stderr, as every line of the supervisor's log (an stderr that is gone is no
/// reason to stop half way: eprintln! would panic).
pub fn log(message: &str) {
    let _ = writeln!(std::io::stderr(), "cluster: {message}");
}
