//! The problems of catalog content, bounded: see [`Problems`].

use super::origin::Problem;

/// Problems found in catalog content: the first [`Problems::MAX_LISTED`] are kept whole and the
/// rest only counted, so that content made of millions of broken blobs costs no more memory to
/// report than a handful. Dereferences to the listed problems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems {
    listed: Vec<Problem>,
    omitted: usize,
}

impl Problems {
    /// How many problems are kept whole; people fix the first ones first anyway.
    pub const MAX_LISTED: usize = 1000;

    /// No problems.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a problem (counted only, once [`Problems::MAX_LISTED`] are listed).
    pub fn push(&mut self, problem: Problem) {
        if self.listed.len() < Self::MAX_LISTED {
            self.listed.push(problem);
        } else {
            self.omitted += 1;
        }
    }

    /// Records every problem of `other`.
    pub fn extend(&mut self, other: Problems) {
        for p in other.listed {
            self.push(p);
        }
        self.omitted += other.omitted;
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty() && self.omitted == 0
    }

    /// Every problem found, listed or not.
    pub fn total(&self) -> usize {
        self.listed.len() + self.omitted
    }

    /// How many were found beyond those listed.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// Whether no more will be listed (further ones are only counted).
    pub fn is_full(&self) -> bool {
        self.listed.len() >= Self::MAX_LISTED
    }

    /// Sorts the listed problems by file and line and drops exact repeats.
    pub fn sort(&mut self) {
        self.listed.sort();
        self.listed.dedup();
    }
}

impl std::ops::Deref for Problems {
    type Target = [Problem];
    fn deref(&self) -> &[Problem] {
        &self.listed
    }
}

impl From<Vec<Problem>> for Problems {
    fn from(problems: Vec<Problem>) -> Self {
        let mut all = Problems::new();
        for p in problems {
            all.push(p);
        }
        all
    }
}

impl IntoIterator for Problems {
    type Item = Problem;
    type IntoIter = std::vec::IntoIter<Problem>;
    fn into_iter(self) -> Self::IntoIter {
        self.listed.into_iter()
    }
}

impl<'a> IntoIterator for &'a Problems {
    type Item = &'a Problem;
    type IntoIter = std::slice::Iter<'a, Problem>;
    fn into_iter(self) -> Self::IntoIter {
        self.listed.iter()
    }
}
