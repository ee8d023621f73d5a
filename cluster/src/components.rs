//! The four components and their flags: pure functions of the binaries, the ports and the
//! folder, so what runs can be read (and tested) without starting anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::folder;
use super::pki::files;
use crate::error::{Error, Result};

/// Extra flags for kube-apiserver, separated by whitespace (the harness's own test of a start
/// that fails half way passes a bad one).
pub const APISERVER_ARGS_ENV: &str = "OLM_TESTBIN_APISERVER_ARGS";

/// Every request that changes something, with its user agent, goes to `audit.log`: the tests
/// of leader election read which replica wrote what. The provisioner's watches go there too
/// (their start and their end): the tests of its drift watches read which it keeps open.
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [watch]
  users: [\"system:serviceaccount:olm-system:provisioner\"]
- level: None
  verbs: [get, list, watch]
- level: Metadata
";

/// The controllers of kube-controller-manager the tests need: garbage collection of owned
/// objects, namespace deletion, default service accounts, Deployments and ReplicaSets, the
/// endpoints of Services (kube-proxy routes by EndpointSlices, Prometheus discovers by
/// Endpoints), and the `kube-root-ca.crt` ConfigMap every Pod with a token mounts.
pub const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,\
deployment-controller,replicaset-controller,serviceaccount-controller,\
endpointslice-controller,endpoints-controller,root-ca-certificate-publisher-controller";

/// Where `tools/testbin/build.sh` put the binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// kube-apiserver, kube-controller-manager and kube-scheduler.
    pub k8s: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
    /// helm.
    pub helm: PathBuf,
    /// CoreDNS (the node's cluster DNS).
    pub coredns: PathBuf,
    /// Kubernetes' pause (the node's sandbox image and the init of its namespaces).
    pub pause: PathBuf,
}

impl Binaries {
    /// Reads build.sh's output: `K8S_BIN=…`, `ETCD_BIN=…`, `HELM_BIN=…`, `COREDNS_BIN=…` and
    /// `PAUSE_BIN=…` lines (quoted by printf's `%q` only when a path needs it).
    pub fn parse(output: &str) -> Result<Binaries> {
        let vars: BTreeMap<&str, &str> = output
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches(['\'', '"'])))
            .collect();
        let get = |key: &str| {
            vars.get(key)
                .map(PathBuf::from)
                .ok_or_else(|| Error::Cluster(format!("build.sh printed no {key}: {output}")))
        };
        Ok(Binaries {
            k8s: get("K8S_BIN")?,
            etcd: get("ETCD_BIN")?,
            helm: get("HELM_BIN")?,
            coredns: get("COREDNS_BIN")?,
            pause: get("PAUSE_BIN")?,
        })
    }
}

/// The free ports of one control plane, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// etcd's clients.
    pub etcd: u16,
    /// etcd's peers (none join, but etcd listens).
    pub etcd_peer: u16,
    /// kube-apiserver.
    pub api: u16,
    /// kube-controller-manager's health and metrics.
    pub controller_manager: u16,
    /// kube-scheduler's health and metrics.
    pub scheduler: u16,
}

impl Ports {
    /// Five free ports.
    pub fn free() -> Result<Ports> {
        let port = || olm_testkit::free_port().map_err(Error::from);
        Ok(Ports {
            etcd: port()?,
            etcd_peer: port()?,
            api: port()?,
            controller_manager: port()?,
            scheduler: port()?,
        })
    }
}

/// A component: its name (of its log file, too) and its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// `etcd`, `kube-apiserver`, ...
    pub name: &'static str,
    /// The program and its arguments.
    pub argv: Vec<String>,
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// etcd, without fsync (a test cluster's data does not outlive it).
pub fn etcd(bins: &Binaries, ports: &Ports, dir: &Path) -> Component {
    let client = format!("http://127.0.0.1:{}", ports.etcd);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    Component {
        name: "etcd",
        argv: vec![
            path(&bins.etcd.join("etcd")),
            "--name=olm-rs".into(),
            format!("--data-dir={}", path(&dir.join("etcd"))),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=olm-rs={peer}"),
            "--listen-metrics-urls=".into(),
        ],
    }
}

/// Where the API server listens, and what it says about the cluster's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiNetwork {
    /// Its one listening address: 127.0.0.1, or this machine's end of the node's veth.
    pub address: String,
    /// `--service-cluster-ip-range`.
    pub services: String,
    /// Whether a node runs: then the `kubernetes` Service has the API server's address as its
    /// endpoint, nodes are authorized as nodes, and the API server reaches kubelets by their
    /// InternalIP with the admin's certificate.
    pub node: bool,
}

impl ApiNetwork {
    /// The control plane alone, on loopback.
    pub fn loopback() -> ApiNetwork {
        ApiNetwork {
            address: "127.0.0.1".into(),
            services: "10.0.0.0/24".into(),
            node: false,
        }
    }
}

/// kube-apiserver: RBAC, client certificates of the CA, service-account tokens signed with
/// the PKI's key, the audit log; with a node, what [`ApiNetwork::node`] says; `extra` flags last.
pub fn apiserver(
    bins: &Binaries,
    ports: &Ports,
    dir: &Path,
    net: &ApiNetwork,
    extra: &[String],
) -> Component {
    let pki = dir.join("pki");
    let pki = |name: &str| path(&pki.join(name));
    let reconciler = if net.node { "lease" } else { "none" };
    let mut argv = vec![
        path(&bins.k8s.join("kube-apiserver")),
        format!("--etcd-servers=http://127.0.0.1:{}", ports.etcd),
        format!("--bind-address={}", net.address),
        format!("--secure-port={}", ports.api),
        format!("--advertise-address={}", net.address),
        format!("--endpoint-reconciler-type={reconciler}"),
        format!("--tls-cert-file={}", pki(files::API_SERVER.0)),
        format!("--tls-private-key-file={}", pki(files::API_SERVER.1)),
        format!("--client-ca-file={}", pki(files::CA)),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!(
            "--service-account-key-file={}",
            pki(files::SERVICE_ACCOUNTS.0)
        ),
        format!(
            "--service-account-signing-key-file={}",
            pki(files::SERVICE_ACCOUNTS.1)
        ),
        format!("--service-cluster-ip-range={}", net.services),
        "--allow-privileged=true".into(),
        format!("--cert-dir={}", path(&dir.join("apiserver-certs"))),
        "--v=1".into(),
        format!(
            "--audit-policy-file={}",
            path(&dir.join("audit-policy.yaml"))
        ),
        format!("--audit-log-path={}", path(&dir.join("audit.log"))),
        "--audit-log-maxsize=200".into(),
        // The aggregation layer, as kubeadm sets it up: aggregated APIs (catalogd's
        // catalogs.olm-rs.io) trust the user in these headers only on connections made with
        // the front proxy's client certificate.
        format!(
            "--requestheader-client-ca-file={}",
            pki(files::FRONT_PROXY_CA)
        ),
        format!(
            "--requestheader-allowed-names={}",
            crate::pki::FRONT_PROXY_CLIENT
        ),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        format!(
            "--proxy-client-cert-file={}",
            pki(files::FRONT_PROXY_CLIENT.0)
        ),
        format!(
            "--proxy-client-key-file={}",
            pki(files::FRONT_PROXY_CLIENT.1)
        ),
    ];
    if net.node {
        argv.extend([
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            // The node would stay tainted not-ready: no node-lifecycle controller runs.
            "--disable-admission-plugins=TaintNodesByCondition".into(),
            "--kubelet-preferred-address-types=InternalIP".into(),
            format!("--kubelet-client-certificate={}", pki(files::ADMIN.0)),
            format!("--kubelet-client-key={}", pki(files::ADMIN.1)),
        ]);
    } else {
        argv.extend([
            "--authorization-mode=RBAC".into(),
            "--kubelet-preferred-address-types=Hostname,InternalIP".into(),
        ]);
    }
    argv.extend(extra.iter().cloned());
    Component {
        name: "kube-apiserver",
        argv,
    }
}

/// Flags kube-controller-manager and kube-scheduler share: loopback only, health and metrics
/// open to any client (the supervisor asks /healthz without credentials).
fn kube_component(bins: &Binaries, binary: &str, dir: &Path, port: u16) -> Vec<String> {
    vec![
        path(&bins.k8s.join(binary)),
        format!("--kubeconfig={}", path(&dir.join(folder::KUBECONFIG))),
        "--leader-elect=false".into(),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
        "--v=1".into(),
    ]
}

/// kube-controller-manager with [`CONTROLLERS`] only.
pub fn controller_manager(bins: &Binaries, ports: &Ports, dir: &Path) -> Component {
    let mut argv = kube_component(
        bins,
        "kube-controller-manager",
        dir,
        ports.controller_manager,
    );
    argv.push(format!("--controllers={CONTROLLERS}"));
    argv.push(format!(
        "--root-ca-file={}",
        path(&dir.join("pki").join(files::CA))
    ));
    Component {
        name: "kube-controller-manager",
        argv,
    }
}

/// kube-scheduler (binds Pods to the node).
pub fn scheduler(bins: &Binaries, ports: &Ports, dir: &Path) -> Component {
    Component {
        name: "kube-scheduler",
        argv: kube_component(bins, "kube-scheduler", dir, ports.scheduler),
    }
}

/// The extra kube-apiserver flags of [`APISERVER_ARGS_ENV`], if any.
pub fn extra_apiserver_args() -> Vec<String> {
    std::env::var(APISERVER_ARGS_ENV)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn bins() -> Binaries {
        Binaries {
            k8s: "/cache/k8s".into(),
            etcd: "/cache/etcd".into(),
            helm: "/cache/helm".into(),
            coredns: "/cache/coredns".into(),
            pause: "/cache/pause".into(),
        }
    }

    const PORTS: Ports = Ports {
        etcd: 1001,
        etcd_peer: 1002,
        api: 1003,
        controller_manager: 1004,
        scheduler: 1005,
    };

    #[test]
    fn with_a_node_the_api_server_listens_on_the_veth_and_authorizes_nodes() {
        let net = ApiNetwork {
            address: "172.30.4.1".into(),
            services: "10.96.4.0/24".into(),
            node: true,
        };
        let api = apiserver(&bins(), &PORTS, Path::new("/run/cp"), &net, &[]);
        for flag in [
            "--bind-address=172.30.4.1",
            "--advertise-address=172.30.4.1",
            "--endpoint-reconciler-type=lease",
            "--service-cluster-ip-range=10.96.4.0/24",
            "--authorization-mode=Node,RBAC",
            "--disable-admission-plugins=TaintNodesByCondition",
            "--kubelet-preferred-address-types=InternalIP",
            "--kubelet-client-certificate=/run/cp/pki/admin.crt",
            "--requestheader-client-ca-file=/run/cp/pki/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client",
            "--proxy-client-cert-file=/run/cp/pki/front-proxy-client.crt",
        ] {
            assert!(api.argv.contains(&flag.into()), "{flag} in {:?}", api.argv);
        }
        // Without one, nothing of that.
        let alone = apiserver(
            &bins(),
            &PORTS,
            Path::new("/run/cp"),
            &ApiNetwork::loopback(),
            &[],
        );
        assert!(
            alone
                .argv
                .contains(&"--endpoint-reconciler-type=none".into())
        );
        assert!(!alone.argv.iter().any(|a| a.starts_with("--kubelet-client")));
    }

    #[test]
    fn build_output_names_every_folder_quoted_or_not() {
        let out = "K8S_BIN=/cache/k8s\nETCD_BIN='/cache/etcd'\nHELM_BIN=/cache/helm\n\
                   COREDNS_BIN=/cache/coredns\nPAUSE_BIN=/cache/pause\n";
        assert_eq!(Binaries::parse(out).unwrap(), bins());
        let err = Binaries::parse("K8S_BIN=/a\n").unwrap_err().to_string();
        assert!(err.contains("ETCD_BIN"), "{err}");
    }

    #[test]
    fn each_component_listens_on_its_own_port_and_finds_its_files_in_the_folder() {
        let dir = Path::new("/run/cp");
        let etcd = etcd(&bins(), &PORTS, dir);
        assert_eq!(etcd.argv[0], "/cache/etcd/etcd");
        assert!(
            etcd.argv
                .contains(&"--listen-client-urls=http://127.0.0.1:1001".into())
        );
        assert!(etcd.argv.contains(&"--data-dir=/run/cp/etcd".into()));

        let api = apiserver(
            &bins(),
            &PORTS,
            dir,
            &ApiNetwork::loopback(),
            &["--extra=1".into()],
        );
        assert_eq!(api.argv[0], "/cache/k8s/kube-apiserver");
        for flag in [
            "--etcd-servers=http://127.0.0.1:1001",
            "--secure-port=1003",
            "--client-ca-file=/run/cp/pki/ca.crt",
            "--tls-private-key-file=/run/cp/pki/apiserver.key",
            "--service-account-key-file=/run/cp/pki/sa.pub",
            "--service-account-signing-key-file=/run/cp/pki/sa.key",
            "--audit-log-path=/run/cp/audit.log",
        ] {
            assert!(api.argv.contains(&flag.into()), "{flag} in {:?}", api.argv);
        }
        assert_eq!(api.argv.last().map(String::as_str), Some("--extra=1"));
        assert!(api.argv.contains(&"--bind-address=127.0.0.1".into()));
        assert!(api.argv.contains(&"--authorization-mode=RBAC".into()));

        let kcm = controller_manager(&bins(), &PORTS, dir);
        assert!(kcm.argv.contains(&"--secure-port=1004".into()));
        assert!(kcm.argv.contains(&"--kubeconfig=/run/cp/kubeconfig".into()));
        assert!(
            kcm.argv
                .iter()
                .any(|a| a.contains("garbage-collector-controller"))
        );
        let sched = scheduler(&bins(), &PORTS, dir);
        assert_eq!(sched.argv[0], "/cache/k8s/kube-scheduler");
        assert!(sched.argv.contains(&"--secure-port=1005".into()));
    }
}
