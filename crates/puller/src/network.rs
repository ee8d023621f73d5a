//! Where sources may connect: the admin's network policy for every fetch a Catalog or a
//! BundleDeployment causes (http, git over https and ssh, registries and the token services and
//! blob stores they name). Their author chooses the URL, so without a policy a Catalog could
//! make catalogd (a BundleDeployment, the provisioner) fetch a cloud's metadata service
//! (link-local), the API server, or the manager's own ports on loopback, and show what came
//! back in a condition.
//!
//! The policy refuses loopback, unspecified (`0.0.0.0`, `::`) and link-local addresses (and
//! the cloud metadata services outside link-local) unless allowed, refuses any address in the denied CIDRs (and the API server's own address), and,
//! when hosts are listed, allows only those. It is enforced where connections are made: URLs
//! (and every redirect) are checked before a request, and names are checked again on every
//! address DNS gives (the resolver of each HTTP client, and the ssh connect), so a name that
//! resolves to a refused address is refused too, whatever it resolved to before.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::error::{Error, ErrorKind};

/// How an admin sets the policy (each manager's network flags, [`crate::flags::NetworkArgs`]).
#[derive(Debug, Clone, Default)]
pub struct NetworkPolicy {
    /// Loopback (127.0.0.0/8, ::1) and unspecified addresses may be reached.
    pub allow_loopback: bool,
    /// Link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata services) may be
    /// reached.
    pub allow_link_local: bool,
    /// Addresses never reached.
    pub denied: Vec<IpNet>,
    /// When not empty, the only hosts that may be reached: names (`git.example.com`,
    /// `*.example.com`) or IP addresses, as URLs name them.
    pub allowed_hosts: Vec<String>,
}

/// Why the policy refused a destination.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl From<Refused> for Error {
    fn from(r: Refused) -> Self {
        Error::new(ErrorKind::HostNotAllowed, r.0)
    }
}

/// The flag an admin changes for each refusal, named in messages.
const LOOPBACK_FLAG: &str = "--allow-loopback-sources";
const LINK_LOCAL_FLAG: &str = "--allow-link-local-sources";
const DENIED_FLAG: &str = "--denied-source-cidrs";
const ALLOWED_FLAG: &str = "--allowed-source-hosts";

/// An address as the kernel would treat it: IPv4-mapped IPv6 addresses are IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// Cloud metadata services outside link-local: AWS's over IPv6 (`fd00:ec2::254`) and
/// Alibaba Cloud's (`100.100.100.200`). Refused as link-local addresses are (the others,
/// AWS's, GCP's, Azure's and Oracle's IPv4 `169.254.169.254`, are link-local).
const METADATA: [IpAddr; 2] = [
    IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 100, 100, 200)),
];

fn host_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    let host = host.trim_matches(['[', ']']);
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern.trim_matches(['[', ']']) == host,
    }
}

impl NetworkPolicy {
    /// The policy with what the manager knows of its cluster denied too: the API server's
    /// address (`KUBERNETES_SERVICE_HOST`, in a Pod) and this Pod's own (`POD_IP`), read through
    /// `env`. A loopback address is left to the loopback rule (on a test machine the API
    /// server and the sources share loopback).
    pub fn deny_own_addresses(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        for var in ["KUBERNETES_SERVICE_HOST", "POD_IP"] {
            let Some(ip) = env(var).and_then(|v| v.trim_matches(['[', ']']).parse::<IpAddr>().ok())
            else {
                continue;
            };
            let ip = canonical(ip);
            if !ip.is_loopback() && !self.denied.iter().any(|n| n.contains(&ip)) {
                self.denied.push(IpNet::from(ip));
            }
        }
        self
    }

    /// Whether `ip` may be reached.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refused> {
        let ip = canonical(ip);
        if (ip.is_loopback() || ip.is_unspecified()) && !self.allow_loopback {
            return Err(Refused(format!(
                "{ip} is a loopback address, which sources do not reach unless the admin allows it ({LOOPBACK_FLAG})"
            )));
        }
        if is_link_local(ip) && !self.allow_link_local {
            return Err(Refused(format!(
                "{ip} is a link-local address (such as a cloud's metadata service), which sources do not reach unless the admin allows it ({LINK_LOCAL_FLAG})"
            )));
        }
        if METADATA.contains(&ip) && !self.allow_link_local {
            return Err(Refused(format!(
                "{ip} is a cloud's metadata service, which sources do not reach unless the admin allows it ({LINK_LOCAL_FLAG})"
            )));
        }
        if let Some(net) = self.denied.iter().find(|n| n.contains(&ip)) {
            return Err(Refused(format!(
                "{ip} is in {net}, where the admin does not let sources reach ({DENIED_FLAG})"
            )));
        }
        Ok(())
    }

    /// Whether `host` (a name or an IP address, as a URL writes it) may be reached: the
    /// allowlist, then, for an address, [`Self::check_ip`]. A name's addresses are checked when
    /// it is resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Refused> {
        if !self.allowed_hosts.is_empty()
            && !self.allowed_hosts.iter().any(|p| host_matches(p, host))
        {
            return Err(Refused(format!(
                "{host} is not one of the hosts the admin lets sources reach ({ALLOWED_FLAG}: {})",
                self.allowed_hosts.join(", ")
            )));
        }
        match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => self.check_ip(ip),
            Err(_) => Ok(()),
        }
    }

    /// Whether `url`'s host may be reached.
    pub fn check_url(&self, url: &url::Url) -> Result<(), Refused> {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_host(&ip.to_string()),
            Some(url::Host::Ipv6(ip)) => self.check_host(&ip.to_string()),
            Some(url::Host::Domain(name)) => self.check_host(name),
            None => Err(Refused(format!("{url} names no host"))),
        }
    }

    /// The addresses of `host:port` that may be reached (for connections made without an
    /// HTTP client: ssh); refused when there are none.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        self.check_host(host)?;
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| Refused(format!("resolving {host}: {e}")))?
            .collect();
        self.allowed(host, found)
    }

    /// `found` (the addresses of `host`) without the refused ones; refused when none is left.
    fn allowed(&self, host: &str, found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Refused> {
        let mut refusal = None;
        let kept: Vec<SocketAddr> = found
            .into_iter()
            .filter(|a| match self.check_ip(a.ip()) {
                Ok(()) => true,
                Err(r) => {
                    refusal.get_or_insert(r);
                    false
                }
            })
            .collect();
        match (kept.is_empty(), refusal) {
            (true, Some(Refused(why))) => Err(Refused(format!("{host} resolves to {why}"))),
            (true, None) => Err(Refused(format!("{host} has no address"))),
            (false, _) => Ok(kept),
        }
    }

    /// A DNS resolver for HTTP clients that yields only addresses the policy allows.
    pub fn resolver(self: &Arc<Self>) -> Arc<PolicyResolver> {
        Arc::new(PolicyResolver(self.clone()))
    }

    /// A redirect policy that follows at most `max` redirects, each to a URL the policy
    /// allows (a name is checked again when it is resolved).
    pub fn redirects(self: &Arc<Self>, max: usize) -> reqwest::redirect::Policy {
        let policy = self.clone();
        reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max {
                return attempt.error(format!("more than {max} redirects"));
            }
            match policy.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused),
            }
        })
    }

    /// The policy's refusal in `error`'s chain, if that is why it failed.
    pub fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
        let mut current = Some(error);
        while let Some(e) = current {
            if let Some(r) = e.downcast_ref::<Refused>() {
                return Some(r.clone());
            }
            current = e.source();
        }
        None
    }
}

/// The resolver of [`NetworkPolicy::resolver`].
#[derive(Debug)]
pub struct PolicyResolver(Arc<NetworkPolicy>);

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            policy.check_host(&host)?;
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept = policy.allowed(&host, found)?;
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_and_link_local_are_refused_by_default() {
        let p = NetworkPolicy::default();
        for refused in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "fe80::1",
            // IPv4-mapped IPv6 is the same address to the kernel.
            "::ffff:169.254.169.254",
            "::ffff:127.0.0.1",
            // Metadata services outside link-local: AWS over IPv6, Alibaba Cloud.
            "fd00:ec2::254",
            "100.100.100.200",
            "::ffff:100.100.100.200",
        ] {
            let err = p.check_ip(ip(refused)).unwrap_err();
            assert!(err.0.contains("--allow-"), "{refused}: {}", err.0);
        }
        for ok in [
            "10.0.0.1",
            "192.168.1.1",
            "8.8.8.8",
            "2001:db8::1",
            "fd00::1",
        ] {
            assert!(p.check_ip(ip(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn an_admin_may_allow_loopback_and_deny_cidrs() {
        let p = NetworkPolicy {
            allow_loopback: true,
            denied: vec![
                "10.96.0.0/12".parse().unwrap(),
                "fd00:ec2::254/128".parse().unwrap(),
            ],
            ..Default::default()
        };
        assert!(p.check_ip(ip("127.0.0.1")).is_ok());
        assert!(
            p.check_ip(ip("169.254.169.254")).is_err(),
            "link-local still refused"
        );
        let err = p.check_ip(ip("10.96.0.1")).unwrap_err();
        assert!(
            err.0.contains("10.96.0.0/12") && err.0.contains(DENIED_FLAG),
            "{}",
            err.0
        );
        assert!(p.check_ip(ip("fd00:ec2::254")).is_err());
        assert!(p.check_ip(ip("10.112.0.1")).is_ok());
    }

    #[test]
    fn the_api_server_and_the_pod_itself_are_denied() {
        let env = |k: &str| match k {
            "KUBERNETES_SERVICE_HOST" => Some("10.96.0.1".to_owned()),
            "POD_IP" => Some("10.244.1.7".to_owned()),
            _ => None,
        };
        let p = NetworkPolicy::default().deny_own_addresses(env);
        assert!(p.check_ip(ip("10.96.0.1")).is_err());
        assert!(p.check_ip(ip("10.244.1.7")).is_err());
        assert!(p.check_ip(ip("10.244.1.8")).is_ok());
        let local = NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        }
        .deny_own_addresses(|_| Some("127.0.0.1".to_owned()));
        assert!(local.denied.is_empty());
    }

    #[test]
    fn listed_hosts_are_the_only_ones_reached() {
        let p = NetworkPolicy {
            allowed_hosts: vec!["git.example.com".into(), "*.registry.example".into()],
            ..Default::default()
        };
        assert!(p.check_host("git.example.com").is_ok());
        assert!(p.check_host("GIT.example.com").is_ok());
        assert!(p.check_host("eu.registry.example").is_ok());
        assert!(p.check_host("registry.example").is_err());
        let err = p.check_host("evil.example").unwrap_err();
        assert!(err.0.contains(ALLOWED_FLAG), "{}", err.0);
        // A listed address is still an address: loopback stays refused.
        let p = NetworkPolicy {
            allowed_hosts: vec!["127.0.0.1".into()],
            ..Default::default()
        };
        assert!(p.check_host("127.0.0.1").is_err());
    }

    #[test]
    fn urls_are_checked_by_their_host() {
        let p = NetworkPolicy::default();
        for refused in [
            "http://169.254.169.254/latest/meta-data/",
            "https://[::1]:6443/api",
            "http://[::ffff:7f00:1]/",
            "http://0.0.0.0:8083/",
        ] {
            let url = url::Url::parse(refused).unwrap();
            assert!(p.check_url(&url).is_err(), "{refused}");
        }
        assert!(
            p.check_url(&url::Url::parse("https://example.com/c.json").unwrap())
                .is_ok()
        );
    }

    #[test]
    fn resolved_addresses_are_filtered_and_none_left_is_a_refusal() {
        let p = NetworkPolicy::default();
        let addrs = |list: &[&str]| -> Vec<SocketAddr> {
            list.iter().map(|a| SocketAddr::new(ip(a), 443)).collect()
        };
        assert_eq!(
            p.allowed("h", addrs(&["127.0.0.1", "10.0.0.1"])).unwrap(),
            addrs(&["10.0.0.1"])
        );
        let err = p.allowed("h", addrs(&["169.254.169.254"])).unwrap_err();
        assert!(
            err.0.starts_with("h resolves to 169.254.169.254"),
            "{}",
            err.0
        );
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let p = Arc::new(NetworkPolicy::default());
        let err = p.resolve("localhost", 80).await.unwrap_err();
        assert!(err.0.contains("loopback"), "{}", err.0);
        let allowed = NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        };
        assert!(!allowed.resolve("localhost", 80).await.unwrap().is_empty());
    }
}
