//! Where catalog content was read, and the problems found there: the locating types every
//! reader of an FBC shares (re-exported by [`super::model`]).

use std::fmt;
use std::sync::Arc;

/// Where something was read: a file and the line its blob starts on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// The file, as the catalog was given (a path, a ConfigMap key, ...).
    pub file: Arc<str>,
    /// 1-based line.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A problem with catalog content, located where possible.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// Where it is.
    pub origin: Option<Origin>,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl Problem {
    /// A problem at `origin`.
    pub fn at(origin: &Origin, message: impl Into<String>) -> Self {
        Self {
            origin: Some(origin.clone()),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(o) => write!(f, "{o}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}
