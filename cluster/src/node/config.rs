//! The node's configuration files: pure functions of its folder and addresses.
//!
//! What each setting is for is what it took on this machine kind (root without
//! CAP_SYS_RESOURCE, cgroup v1 controllers beside the unified hierarchy, no systemd), as
//! `docs/development.md` ("The node") tells.

use std::path::{Path, PathBuf};

use super::network::Addresses;

/// The node's name, as the kubelet registers it (and as its client certificate names it).
pub const NODE_NAME: &str = "olm-node";

/// The sandbox image's repository and tag in the node's registry.
pub const PAUSE_IMAGE: (&str, &str) = ("olm-rs/pause", "3.10.2");

/// containerd's socket, inside the node's private `/run`.
pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";

/// The kernel settings the kubelet insists on (it fails to start when it cannot make them so).
/// They are not per namespace: the node sees files with these values instead, bind-mounted over
/// the real ones in its own mount namespace, so the kubelet finds them as it wants them and this
/// machine's stay as they are.
pub const KUBELET_SYSCTLS: &[(&str, &str)] = &[
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// The programs of `/usr/sbin` the node may run, linked into a folder of its own that stands
/// for `sbin` on its `PATH`: iptables (kube-proxy, the kubelet and the CNI bridge write rules in
/// the node's network namespace) and runc. Left out on purpose: `modprobe` (a kernel module is
/// a change to this machine).
pub const SBIN_TOOLS: &[&str] = &[
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
    "runc",
];

/// Where the node's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<cluster dir>/node`.
    pub dir: PathBuf,
}

impl Layout {
    /// A file or folder of the node.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The folder of the node's `hosts.toml` files (containerd's `config_path`).
    pub fn registry_hosts(&self) -> PathBuf {
        self.path("certs.d")
    }

    /// The CNI configuration folder.
    pub fn cni(&self) -> PathBuf {
        self.path("cni")
    }

    /// The node's `PATH`.
    pub fn path_env(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.path("sbin").display()
        )
    }
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// containerd's configuration: its own root, state and socket; the CRI plugin with the
/// cgroupfs driver (no systemd here), the sandbox image from the node's registry, and
/// `restrict_oom_score_adj` (without it every sandbox fails: root here may not lower
/// `oom_score_adj`, and runc's `can't get final child's PID from pipe: EOF` says only that).
pub fn containerd(layout: &Layout, registry: &str) -> String {
    let (pause, tag) = PAUSE_IMAGE;
    format!(
        r#"version = 2
root = "{root}"
state = "/run/containerd"
[grpc]
  address = "{CONTAINERD_SOCKET}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{registry}/{pause}:{tag}"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
"#,
        root = p(&layout.path("containerd")),
        cni = p(&layout.cni()),
        hosts = p(&layout.registry_hosts()),
    )
}

/// The `hosts.toml` that lets containerd pull from the node's registry over plain HTTP.
pub fn registry_hosts(registry: &str) -> String {
    format!(
        "server = \"http://{registry}\"\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

/// The kubelet's configuration. Beside what a kubelet on a real machine needs: cgroupfs under a
/// cgroup of this node's own (swept when it stops), cgroup v1 and swap allowed, serving on the
/// node's address only, clients authenticated by the cluster CA and authorized by the API
/// server (the API server presents the admin certificate for logs and exec), DNS from the
/// node's CoreDNS and never this machine's resolv.conf, and eviction thresholds low enough that
/// a full build disk does not evict the tests' Pods.
pub fn kubelet(layout: &Layout, a: &Addresses, ca_file: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup}
failCgroupV1: false
failSwapOn: false
address: {node}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
containerRuntimeEndpoint: unix://{CONTAINERD_SOCKET}
volumePluginDir: {plugins}
clusterDNS: [{node}]
clusterDomain: cluster.local
resolvConf: ""
serializeImagePulls: false
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
        cgroup = cgroup_root(a),
        node = a.node(),
        ca = p(ca_file),
        plugins = p(&layout.path("kubelet/volume-plugins")),
    )
}

/// The node's cgroup (in every hierarchy): the kubelet's `cgroupRoot`.
pub fn cgroup_root(a: &Addresses) -> String {
    a.host_link()
}

/// kube-proxy's configuration: iptables in the node's namespace; every connection to a
/// Service masqueraded (Pods share one bridge, so a reply would otherwise skip the node's NAT);
/// conntrack limits left alone (they are this machine's, not the namespace's).
pub fn kube_proxy(a: &Addresses, kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
hostnameOverride: {NODE_NAME}
mode: iptables
clusterCIDR: {pods}
nodePortAddresses: [primary]
iptables: {{masqueradeAll: true}}
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
"#,
        kubeconfig = p(kubeconfig),
        pods = a.pod_cidr(),
    )
}

/// CoreDNS's Corefile: `cluster.local` from the API server, on the node's address (every Pod's
/// nameserver); nothing is forwarded (this machine reaches no other DNS server to forward to).
pub fn corefile(a: &Addresses, kubeconfig: &Path) -> String {
    format!(
        r#".:53 {{
    bind {node}
    errors
    health {node}:18080
    ready {node}:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"#,
        node = a.node(),
        kubeconfig = p(kubeconfig),
    )
}

/// CoreDNS's readiness endpoint (200 once it has read the cluster's Services).
pub fn coredns_ready(a: &Addresses) -> String {
    format!("http://{}:18181/ready", a.node())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            dir: "/run/cp/node".into(),
        }
    }

    #[test]
    fn containerd_keeps_to_the_nodes_folder_and_takes_its_sandbox_from_the_nodes_registry() {
        let c = containerd(&layout(), "172.30.1.1:5000");
        assert!(c.contains(r#"root = "/run/cp/node/containerd""#), "{c}");
        assert!(c.contains("restrict_oom_score_adj = true"));
        assert!(c.contains("SystemdCgroup = false"));
        assert!(c.contains(r#"sandbox_image = "172.30.1.1:5000/olm-rs/pause:3.10.2""#));
        assert!(c.contains(r#"config_path = "/run/cp/node/certs.d""#));
        assert!(c.contains(r#"conf_dir = "/run/cp/node/cni""#));
    }

    #[test]
    fn the_registry_is_plain_http() {
        let h = registry_hosts("172.30.1.1:5000");
        assert!(h.starts_with("server = \"http://172.30.1.1:5000\""));
    }

    #[test]
    fn the_kubelet_serves_on_the_node_only_and_authenticates_its_clients() {
        let a = Addresses { index: 1 };
        let k = kubelet(&layout(), &a, Path::new("/run/cp/pki/ca.crt"));
        for line in [
            "cgroupDriver: cgroupfs",
            "cgroupRoot: /olm-node-1",
            "failCgroupV1: false",
            "address: 172.30.1.2",
            "  anonymous: {enabled: false}",
            "  x509: {clientCAFile: /run/cp/pki/ca.crt}",
            "authorization: {mode: Webhook}",
            "clusterDNS: [172.30.1.2]",
            "resolvConf: \"\"",
            "volumePluginDir: /run/cp/node/kubelet/volume-plugins",
        ] {
            assert!(k.lines().any(|l| l == line), "{line} in\n{k}");
        }
    }

    #[test]
    fn kube_proxy_and_coredns_know_the_nodes_ranges_and_address() {
        let a = Addresses { index: 1 };
        let kp = kube_proxy(&a, Path::new("/k"));
        assert!(kp.contains("clusterCIDR: 10.244.1.0/24"));
        assert!(kp.contains("masqueradeAll: true"));
        let dns = corefile(&a, Path::new("/k"));
        assert!(dns.contains("bind 172.30.1.2"));
        assert!(dns.contains("kubernetes cluster.local"));
        assert!(!dns.contains("forward"));
    }

    #[test]
    fn the_nodes_path_has_iptables_and_runc_but_no_modprobe() {
        assert!(layout().path_env().starts_with("/run/cp/node/sbin:"));
        assert!(!layout().path_env().contains("/usr/sbin"));
        assert!(SBIN_TOOLS.contains(&"iptables") && SBIN_TOOLS.contains(&"runc"));
        assert!(!SBIN_TOOLS.contains(&"modprobe"));
    }
}
