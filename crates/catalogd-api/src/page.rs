//! List pagination (`limit` and `continue`): items are listed in name order, and a continue
//! token names the served content it was made from and the last name sent, so the next page
//! starts after it. When the content changed since, the token is refused with 410 Gone, as
//! the API server refuses an expired one: a list is one content's, never a mix.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The longest token read.
const MAX_TOKEN: usize = 2048;

/// Where a list continues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continue {
    /// The resourceVersion of the list the token belongs to.
    #[serde(rename = "rv")]
    pub version: String,
    /// The last name sent.
    #[serde(rename = "after")]
    pub after: String,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token this server made (400).
    Invalid,
    /// Made from content no longer served (410).
    Expired,
}

impl Continue {
    /// The token's text.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Reads `token`, refusing it unless it was made for `version`.
    ///
    /// # Errors
    ///
    /// [`TokenError`].
    pub fn decode(token: &str, version: &str) -> Result<Continue, TokenError> {
        if token.len() > MAX_TOKEN {
            return Err(TokenError::Invalid);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| TokenError::Invalid)?;
        let parsed: Continue = serde_json::from_slice(&bytes).map_err(|_| TokenError::Invalid)?;
        if parsed.version != version {
            return Err(TokenError::Expired);
        }
        Ok(parsed)
    }
}

/// One page of `names` (sorted): those after `after`, at most `limit` (0: all), and the
/// token of the next page when more remain.
pub fn page<T>(
    items: Vec<T>,
    name: impl Fn(&T) -> &str,
    after: Option<&str>,
    limit: usize,
    version: &str,
) -> (Vec<T>, Option<String>) {
    let start = after.map_or(0, |after| items.partition_point(|i| name(i) <= after));
    let mut rest: Vec<T> = items.into_iter().skip(start).collect();
    if limit == 0 || rest.len() <= limit {
        return (rest, None);
    }
    rest.truncate(limit);
    let token = rest.last().map(|last| {
        Continue {
            version: version.to_owned(),
            after: name(last).to_owned(),
        }
        .encode()
    });
    (rest, token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A token reads back as what it was made from; any other text is refused, never a
        /// panic.
        #[test]
        fn tokens_round_trip_and_any_text_is_safe(version in "[0-9a-f]{0,16}", after in ".{0,80}", junk in ".{0,120}") {
            let token = Continue { version: version.clone(), after: after.clone() }.encode();
            prop_assert_eq!(Continue::decode(&token, &version), Ok(Continue { version, after }));
            let _ = Continue::decode(&junk, "v");
        }
    }

    #[test]
    fn pages_follow_each_other_to_the_end() {
        let names: Vec<String> = (0..7).map(|i| format!("n{i}")).collect();
        let mut after: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let (items, token) = page(names.clone(), |s| s, after.as_deref(), 3, "v1");
            seen.extend(items);
            let Some(token) = token else { break };
            after = Some(Continue::decode(&token, "v1").unwrap().after);
        }
        assert_eq!(seen, names);
    }

    #[test]
    fn tokens_of_other_content_or_not_ours_are_refused() {
        let token = Continue {
            version: "v1".into(),
            after: "a".into(),
        }
        .encode();
        assert_eq!(Continue::decode(&token, "v2"), Err(TokenError::Expired));
        assert_eq!(Continue::decode("%%%", "v1"), Err(TokenError::Invalid));
        assert_eq!(Continue::decode("e30", "v1"), Err(TokenError::Invalid));
    }
}
