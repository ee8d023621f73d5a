//! Where credentials may go and where sources may connect, for arbitrary annotations and URLs
//! (what Catalog authors and Secret owners write). Never a panic, and three properties checked
//! against a second way of deciding:
//!
//! 1. A Secret naming a URL's exact host lets it be sent there; one naming a host that is not
//!    the URL's (nor a wildcard) does not.
//! 2. The order and repetition of the annotation's entries never change the decision.
//! 3. The network policy refuses a URL whose host is a loopback or link-local address
//!    (IPv4-mapped included), as `std`'s address classification says, by default.
#![no_main]

use std::collections::BTreeMap;
use std::net::IpAddr;

use olm_puller::network::NetworkPolicy;
use olm_puller::scope::{HOSTS_ANNOTATION, Target, User, check};
use k8s_openapi::api::core::v1::Secret;
use libfuzzer_sys::fuzz_target;

fn secret(hosts: &str) -> Secret {
    let mut annotations = BTreeMap::new();
    annotations.insert(HOSTS_ANNOTATION.to_owned(), hosts.to_owned());
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some(annotations),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn allows(hosts: &str, url: &url::Url) -> bool {
    check(&secret(hosts), "s", &User::Catalog("c".into()), &Target::Url(url)).is_ok()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (hosts, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let Ok(url) = url::Url::parse(rest.trim()) else {
        return;
    };
    let decided = allows(hosts, &url);
    // 2: reversed and doubled entries decide the same.
    let entries: Vec<&str> = hosts
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
        .collect();
    let mut reversed = entries.clone();
    reversed.reverse();
    let shuffled = format!("{}, {}", reversed.join(" "), entries.join(","));
    if !entries.is_empty() {
        assert_eq!(allows(&shuffled, &url), decided, "{hosts:?} / {shuffled:?} for {url}");
    }
    // 1: the exact host.
    if let Some(host) = url.host_str().filter(|h| !h.is_empty() && !h.contains([',', ' ', '*'])) {
        assert!(allows(host, &url), "{host} for {url}");
        if !host.starts_with("other-") {
            assert!(!allows(&format!("other-{host}"), &url), "other-{host} for {url}");
        }
    }
    // 3: loopback and link-local addresses, by default.
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4)),
        _ => None,
    };
    if let Some(ip) = ip {
        let local = match ip {
            IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
            IpAddr::V6(v6) => {
                v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
            }
        };
        let refused = NetworkPolicy::default().check_url(&url).is_err();
        assert_eq!(refused, local, "{url}");
    }
});
