//! What a registry answers is untrusted: `WWW-Authenticate` challenges, token service answers
//! and error bodies. Arbitrary bytes never panic, and:
//!
//! 1. A Bearer challenge that parses renders back (every parameter quoted) to one that parses
//!    to the same challenge: the parser agrees with the format it reads.
//! 2. What an error body becomes in a message is at most 200 characters, whatever the body.
//! 3. A token, when found, is not empty.
#![no_main]

use olm_puller::image::client::{Challenge, parse_challenge, parse_error_body, parse_token};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(Challenge::Bearer {
        realm,
        service,
        scope,
    }) = parse_challenge(&text)
    {
        // Quoted values cannot hold a quote; a parsed value never does either.
        assert!(!realm.contains('"'), "{realm:?}");
        let mut rendered = format!(r#"Bearer realm="{realm}""#);
        if let Some(s) = &service {
            rendered.push_str(&format!(r#",service="{s}""#));
        }
        if let Some(s) = &scope {
            rendered.push_str(&format!(r#",scope="{s}""#));
        }
        assert_eq!(
            parse_challenge(&rendered),
            Some(Challenge::Bearer {
                realm,
                service,
                scope
            }),
            "{rendered:?} from {text:?}"
        );
    }
    let (_, words) = parse_error_body(data);
    assert!(words.chars().count() <= 200, "{} characters", words.chars().count());
    if let Some(token) = parse_token(data) {
        assert!(!token.is_empty());
    }
});
