//! The node's addresses and the commands that wire its network namespace to this machine: pure
//! functions of the node's index, so what runs can be read (and tested) without root.
//!
//! The node lives in a network namespace of its own, joined to this machine by one veth pair:
//! `olm-node-<i>` here with `172.30.<i>.1/30`, `eth0` in the node with `172.30.<i>.2/30`. The
//! API server and the node's registry listen on `172.30.<i>.1`; the node routes everything else
//! there. Pods get `10.244.<i>.0/24` on a bridge inside the node (its gateway `10.244.<i>.1`),
//! Services `10.96.<i>.0/24`; this machine reaches both through routes on the veth. Whatever
//! kube-proxy, the kubelet and the CNI plugins write (iptables rules, the bridge, sysctls such as
//! `ip_forward`) stays in that namespace, and the kernel removes the namespace, the veth pair and
//! its routes when the node's last process is gone, even after a SIGKILL.

use std::net::Ipv4Addr;

/// The interface names and addresses of node `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// 0..=255: the third octet of every address below.
    pub index: u8,
}

/// The highest index tried: one node per index may run on a machine at a time.
pub const MAX_INDEX: u8 = 255;

/// The node-side end of the veth pair.
pub const NODE_LINK: &str = "eth0";

/// The Pods' bridge in the node (the CNI bridge plugin makes it with the first Pod).
pub const BRIDGE: &str = "olm0";

impl Addresses {
    /// The host end of the veth pair (at most 15 characters, as Linux requires).
    pub fn host_link(&self) -> String {
        format!("olm-node-{}", self.index)
    }

    /// This machine's address on the veth: where the node reaches the API server and the
    /// registry.
    pub fn host(&self) -> Ipv4Addr {
        Ipv4Addr::new(172, 30, self.index, 1)
    }

    /// The node's address (its InternalIP, the kubelet's and CoreDNS's listening address).
    pub fn node(&self) -> Ipv4Addr {
        Ipv4Addr::new(172, 30, self.index, 2)
    }

    /// The Pods' range.
    pub fn pod_cidr(&self) -> String {
        format!("10.244.{}.0/24", self.index)
    }

    /// The Pods' gateway: the bridge's address.
    pub fn pod_gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 244, self.index, 1)
    }

    /// The Services' range (the API server's `--service-cluster-ip-range`).
    pub fn service_cidr(&self) -> String {
        format!("10.96.{}.0/24", self.index)
    }

    /// The `kubernetes` Service's address: the first of the range.
    pub fn kubernetes_service(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 96, self.index, 1)
    }
}

/// The commands, run on this machine, that create the veth pair into the network namespace of
/// process `pid`, address its host end and route the node's ranges through it. The first one
/// fails when another node holds this index (the link exists): the caller then tries the next.
pub fn host_commands(a: &Addresses, pid: u32) -> Vec<Vec<String>> {
    let link = a.host_link();
    let via = a.node().to_string();
    [
        vec![
            "ip",
            "link",
            "add",
            &link,
            "type",
            "veth",
            "peer",
            "name",
            NODE_LINK,
            "netns",
            &pid.to_string(),
        ],
        vec![
            "ip",
            "addr",
            "add",
            &format!("{}/30", a.host()),
            "dev",
            &link,
        ],
        vec!["ip", "link", "set", &link, "up"],
        vec![
            "ip",
            "route",
            "add",
            &a.pod_cidr(),
            "via",
            &via,
            "dev",
            &link,
        ],
        vec![
            "ip",
            "route",
            "add",
            &a.service_cidr(),
            "via",
            &via,
            "dev",
            &link,
        ],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect()
}

/// The commands, run inside the node's network namespace, that bring up its loopback and its
/// end of the veth, route everything to this machine, and let it forward (between Pods and
/// Services: a per-namespace setting, this machine's stays as it is).
pub fn node_commands(a: &Addresses) -> Vec<Vec<String>> {
    [
        vec!["ip", "link", "set", "lo", "up"],
        vec![
            "ip",
            "addr",
            "add",
            &format!("{}/30", a.node()),
            "dev",
            NODE_LINK,
        ],
        vec!["ip", "link", "set", NODE_LINK, "up"],
        vec![
            "ip",
            "route",
            "add",
            "default",
            "via",
            &a.host().to_string(),
        ],
        vec!["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect()
}

/// The CNI configuration: a bridge with host-local addresses from the Pods' range, the bridge
/// as their gateway, traffic that leaves the node masqueraded (so this machine answers the
/// node's address, which it can reach), hairpin on so that a Pod reaches itself through its
/// Service.
pub fn cni_config(a: &Addresses, ipam_dir: &str) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "olm-rs",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": a.pod_cidr(), "gateway": a.pod_gateway().to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir,
                },
            },
            {"type": "loopback"},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_of_a_node_carries_its_index_and_no_two_nodes_share_one() {
        let a = Addresses { index: 7 };
        assert_eq!(a.host_link(), "olm-node-7");
        assert_eq!(a.host().to_string(), "172.30.7.1");
        assert_eq!(a.node().to_string(), "172.30.7.2");
        assert_eq!(a.pod_cidr(), "10.244.7.0/24");
        assert_eq!(a.pod_gateway().to_string(), "10.244.7.1");
        assert_eq!(a.service_cidr(), "10.96.7.0/24");
        assert_eq!(a.kubernetes_service().to_string(), "10.96.7.1");
        let b = Addresses { index: 8 };
        assert_ne!(a.host(), b.host());
        assert_ne!(a.pod_cidr(), b.pod_cidr());
        assert_ne!(a.service_cidr(), b.service_cidr());
        // Linux limits interface names to 15 bytes.
        assert!(Addresses { index: MAX_INDEX }.host_link().len() <= 15);
    }

    #[test]
    fn the_veth_is_made_first_so_that_a_taken_index_fails_before_anything_changes() {
        let a = Addresses { index: 3 };
        let cmds = host_commands(&a, 4242);
        assert_eq!(
            cmds[0].join(" "),
            "ip link add olm-node-3 type veth peer name eth0 netns 4242"
        );
        // Every later command names the link, so they all go away with it.
        assert!(
            cmds[1..]
                .iter()
                .all(|c| c.contains(&"olm-node-3".to_owned()))
        );
        assert!(
            cmds.iter()
                .any(|c| c.join(" ") == "ip route add 10.96.3.0/24 via 172.30.3.2 dev olm-node-3")
        );
    }

    #[test]
    fn the_node_routes_to_this_machine_and_forwards_only_inside() {
        let cmds = node_commands(&Addresses { index: 3 });
        let lines: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
        assert!(lines.contains(&"ip route add default via 172.30.3.1".to_owned()));
        assert!(lines.iter().any(|l| l.contains("ip_forward")));
    }

    #[test]
    fn pods_get_the_nodes_range_with_the_bridge_as_gateway() {
        let c = cni_config(&Addresses { index: 3 }, "/var/lib/cni/networks");
        let bridge = &c["plugins"][0];
        assert_eq!(bridge["type"], "bridge");
        assert_eq!(bridge["isGateway"], true);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.244.3.0/24");
        assert_eq!(bridge["ipam"]["ranges"][0][0]["gateway"], "10.244.3.1");
    }
}
