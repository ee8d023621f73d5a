//! URLs as messages, events and logs show them: never credentials (user info, pre-signed
//! query strings). Every source and the credential scope show URLs this way.

/// The URL as messages and events show it: no user info, no query string (pre-signed URLs carry
/// credentials there), no fragment.
pub fn redact(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        // Not a URL (the API server's pattern makes that rare): show only what precedes any
        // query, and never user info.
        let cut = text.split(['?', '#']).next().unwrap_or_default();
        return cut.rsplit('@').next().unwrap_or_default().to_owned();
    };
    let elided = url.query().is_some() || url.fragment().is_some();
    // Setting these fails only for URLs that cannot have them, which then have none.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    let mut shown = url.to_string();
    // `Url` writes a root path for a bare host; keep what the user wrote.
    if !text.trim_end_matches(['?', '#']).ends_with('/') && url.path() == "/" {
        shown.pop();
    }
    if elided {
        shown.push_str("?…");
    }
    shown
}
