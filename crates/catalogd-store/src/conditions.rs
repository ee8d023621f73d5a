//! The conditional headers of a content request (RFC 9110 §13), judged in the order Go's
//! `http.ServeContent` judges them, as upstream catalogd serves its content with it:
//! `If-Match` (else `If-Unmodified-Since`) failing is 412; `If-None-Match` (else
//! `If-Modified-Since`) matching is 304; `If-Range` decides whether a `Range` applies.
//! Dates compare at the one-second resolution of HTTP dates; a date that does not parse is no
//! condition (upstream answers 500 to one on its metas endpoint; nothing is gained by that).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use axum::http::header::{
    IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE,
};

use crate::store::Stored;

/// What the conditions say about a request for the current content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Proceed,
    /// 304: the client's copy is current.
    NotModified,
    /// 412: the client asked for another version.
    PreconditionFailed,
}

/// The request's conditional headers.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    if_match: Option<Vec<String>>,
    if_unmodified_since: Option<SystemTime>,
    if_none_match: Option<Vec<String>>,
    if_modified_since: Option<SystemTime>,
    if_range: Option<String>,
}

/// The entity tags of header `name`; none when it is absent or empty (an empty header is no
/// condition, as Go's `checkIfMatch` and `checkIfNoneMatch` read it).
fn tags(headers: &HeaderMap, name: axum::http::HeaderName) -> Option<Vec<String>> {
    let tags: Vec<String> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().to_owned())
        .filter(|tag| !tag.is_empty())
        .collect();
    (!tags.is_empty()).then_some(tags)
}

fn date(headers: &HeaderMap, name: axum::http::HeaderName) -> Option<SystemTime> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
}

/// Seconds since the epoch: HTTP dates have no finer resolution.
fn secs(t: SystemTime) -> Option<u64> {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).ok()
}

/// The opaque part of an entity tag (`"x"` or `W/"x"` → `x`), and whether it is weak.
fn opaque(tag: &str) -> Option<(&str, bool)> {
    let (tag, weak) = match tag.strip_prefix("W/") {
        Some(rest) => (rest, true),
        None => (tag, false),
    };
    let inner = tag.strip_prefix('"')?.strip_suffix('"')?;
    Some((inner, weak))
}

impl Conditions {
    /// The conditions of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        Self {
            if_match: tags(headers, IF_MATCH),
            if_unmodified_since: date(headers, IF_UNMODIFIED_SINCE),
            if_none_match: tags(headers, IF_NONE_MATCH),
            if_modified_since: date(headers, IF_MODIFIED_SINCE),
            // An empty If-Range is no condition, as Go reads it.
            if_range: headers
                .get(IF_RANGE)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty()),
        }
    }

    /// The verdict for `stored`, whose strong validator is `"<hash>"` and whose
    /// Last-Modified is its storing time.
    pub fn verdict(&self, stored: &Stored) -> Verdict {
        let modified = secs(stored.last_modified);
        // If-Match compares strongly ("*" matches any current content); without it,
        // If-Unmodified-Since.
        let matches = match &self.if_match {
            Some(tags) => Some(tags.iter().any(|tag| {
                tag == "*" || opaque(tag).is_some_and(|(t, weak)| !weak && t == stored.hash)
            })),
            None => self
                .if_unmodified_since
                .and_then(secs)
                .zip(modified)
                .map(|(since, modified)| modified <= since),
        };
        if matches == Some(false) {
            return Verdict::PreconditionFailed;
        }
        // If-None-Match compares weakly, so the gzip body's weak tag validates too; without
        // it, If-Modified-Since.
        let current = match &self.if_none_match {
            Some(tags) => tags
                .iter()
                .any(|tag| tag == "*" || opaque(tag).is_some_and(|(t, _)| t == stored.hash)),
            None => self
                .if_modified_since
                .and_then(secs)
                .zip(modified)
                .is_some_and(|(since, modified)| modified <= since),
        };
        if current {
            Verdict::NotModified
        } else {
            Verdict::Proceed
        }
    }

    /// Whether a `Range` may be honoured for `stored`: without `If-Range`, or when it names
    /// the current content (its strong tag, or exactly its Last-Modified date).
    pub fn range_applies(&self, stored: &Stored) -> bool {
        let Some(if_range) = &self.if_range else {
            return true;
        };
        if let Some((tag, weak)) = opaque(if_range) {
            return !weak && tag == stored.hash;
        }
        httpdate::parse_http_date(if_range)
            .ok()
            .and_then(secs)
            .is_some_and(|date| Some(date) == secs(stored.last_modified))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn stored() -> Stored {
        Stored {
            hash: "abc".into(),
            size: 1,
            last_modified: UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_500),
        }
    }

    fn verdict(pairs: &[(&'static str, &str)]) -> Verdict {
        Conditions::from_headers(&headers(pairs)).verdict(&stored())
    }

    #[test]
    fn if_none_match_compares_weakly_and_dates_by_second() {
        let t = stored().last_modified;
        assert_eq!(
            verdict(&[("if-none-match", "\"abc\"")]),
            Verdict::NotModified
        );
        assert_eq!(
            verdict(&[("if-none-match", "\"x\", W/\"abc\"")]),
            Verdict::NotModified
        );
        assert_eq!(verdict(&[("if-none-match", "*")]), Verdict::NotModified);
        assert_eq!(verdict(&[("if-none-match", "\"x\"")]), Verdict::Proceed);
        assert_eq!(verdict(&[("if-none-match", "abc")]), Verdict::Proceed);
        let date = httpdate::fmt_http_date(t);
        assert_eq!(
            verdict(&[("if-modified-since", &date)]),
            Verdict::NotModified
        );
        let earlier = httpdate::fmt_http_date(t - std::time::Duration::from_secs(1));
        assert_eq!(
            verdict(&[("if-modified-since", &earlier)]),
            Verdict::Proceed
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            verdict(&[("if-none-match", "\"x\""), ("if-modified-since", &date)]),
            Verdict::Proceed
        );
        // A date that does not parse is no condition.
        assert_eq!(
            verdict(&[("if-modified-since", "yesterday")]),
            Verdict::Proceed
        );
        assert_eq!(verdict(&[]), Verdict::Proceed);
    }

    #[test]
    fn if_match_and_if_unmodified_since_fail_with_412() {
        let t = stored().last_modified;
        assert_eq!(
            verdict(&[("if-match", "\"x\"")]),
            Verdict::PreconditionFailed
        );
        // Strong comparison: the weak form of the current tag does not match.
        assert_eq!(
            verdict(&[("if-match", "W/\"abc\"")]),
            Verdict::PreconditionFailed
        );
        assert_eq!(verdict(&[("if-match", "\"abc\"")]), Verdict::Proceed);
        assert_eq!(verdict(&[("if-match", "*")]), Verdict::Proceed);
        // An empty header is no condition.
        assert_eq!(verdict(&[("if-match", "")]), Verdict::Proceed);
        assert_eq!(verdict(&[("if-none-match", "")]), Verdict::Proceed);
        let earlier = httpdate::fmt_http_date(t - std::time::Duration::from_secs(1));
        assert_eq!(
            verdict(&[("if-unmodified-since", &earlier)]),
            Verdict::PreconditionFailed
        );
        let same = httpdate::fmt_http_date(t);
        assert_eq!(verdict(&[("if-unmodified-since", &same)]), Verdict::Proceed);
        // If-Match wins over If-Unmodified-Since, and 412 over 304.
        assert_eq!(
            verdict(&[("if-match", "\"abc\""), ("if-unmodified-since", &earlier)]),
            Verdict::Proceed
        );
        assert_eq!(
            verdict(&[("if-match", "\"x\""), ("if-none-match", "\"abc\"")]),
            Verdict::PreconditionFailed
        );
    }

    #[test]
    fn if_range_names_the_current_content_by_strong_tag_or_exact_date() {
        let applies = |pairs: &[(&'static str, &str)]| {
            Conditions::from_headers(&headers(pairs)).range_applies(&stored())
        };
        let t = stored().last_modified;
        assert!(applies(&[]));
        assert!(applies(&[("if-range", "\"abc\"")]));
        assert!(!applies(&[("if-range", "W/\"abc\"")]));
        assert!(!applies(&[("if-range", "\"x\"")]));
        assert!(applies(&[("if-range", &httpdate::fmt_http_date(t))]));
        let later = httpdate::fmt_http_date(t + std::time::Duration::from_secs(5));
        assert!(!applies(&[("if-range", &later)]));
        assert!(!applies(&[("if-range", "garbage")]));
        assert!(applies(&[("if-range", "")]));
    }

    proptest::proptest! {
        /// Any header values: a verdict, never a panic; and If-Match of anything but the
        /// current tag or `*` is 412 whatever else is sent.
        #[test]
        fn any_conditional_headers_get_a_verdict(
            if_match in "[ -~]{0,30}",
            if_none_match in "[ -~]{0,30}",
            since in "[ -~]{0,30}",
            if_range in "[ -~]{0,30}",
        ) {
            let h = headers(&[
                ("if-none-match", &if_none_match),
                ("if-modified-since", &since),
                ("if-unmodified-since", &since),
                ("if-range", &if_range),
            ]);
            let c = Conditions::from_headers(&h);
            let _ = c.verdict(&stored());
            let _ = c.range_applies(&stored());
            let mut with_match = h.clone();
            if let Ok(v) = HeaderValue::from_str(&if_match) {
                with_match.insert("if-match", v);
                let tags: Vec<&str> =
                    if_match.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
                let names_current = tags.iter().any(|t| *t == "*" || *t == "\"abc\"");
                let verdict = Conditions::from_headers(&with_match).verdict(&stored());
                // An empty If-Match is no condition.
                proptest::prop_assert_eq!(
                    verdict == Verdict::PreconditionFailed,
                    !tags.is_empty() && !names_current
                );
            }
        }
    }
}
