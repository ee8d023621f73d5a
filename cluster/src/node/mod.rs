//! The node of the local cluster: containerd and runc, a kubelet, kube-proxy, CoreDNS and a
//! registry for its images, so that Pods really run.
//!
//! Everything of the node lives in namespaces of its own, held by one process (`unshare`
//! running Kubernetes' `pause` as the init of a new PID namespace, with new mount and network
//! namespaces): containerd, the kubelet, kube-proxy and CoreDNS are entered into them with
//! `nsenter`. The node's `/run`, `/var/lib` and `/var/log` are private tmpfs mounts, the
//! kernel settings the kubelet wants are files bind-mounted over `/proc/sys` in that mount
//! namespace ([`config::KUBELET_SYSCTLS`]), and its network is joined to this machine by one
//! veth pair ([`network`]). When the holder dies (it dies with the supervisor, even a killed
//! one), the kernel kills every process of the node, containers included, and removes its
//! mounts, its network namespace, the veth pair and its routes. What the kernel keeps, the
//! supervisor removes: the node's cgroups ([`cgroups`]) and its folder; and when the supervisor
//! itself is killed outright, its [`reaper`] removes the cgroups.
//!
//! The node reaches the API server and its registry on this machine's end of the veth; the
//! registry is a `docker-registry` of the node's own (plain HTTP, as `hosts.toml` tells
//! containerd), holding the sandbox image built from `pause.c`.

pub mod cgroups;
pub mod config;
pub mod network;
pub mod reaper;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node as NodeObject;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use self::cgroups::RELEASE;
use self::config::Layout;
use self::network::Addresses;
use super::children::Children;
use super::components::{Binaries, Component};
use super::folder::io_error;
use super::kubeconfig;
use super::pki::{self, Pki};
use super::step::{Probe, Step, wait_until};
use crate::error::{Error, Result};
use crate::log::log;

/// The node's folder in the cluster's folder.
pub const FOLDER: &str = "node";

/// The file of the node's folder that names its index (read by the clean-up).
const INDEX_FILE: &str = "index";

/// The component holding the node's namespaces.
const HOLDER: &str = "node-namespaces";

/// A node whose namespaces and network are up.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its addresses.
    pub addresses: Addresses,
    /// Its files.
    pub layout: Layout,
    /// The init of its PID namespace (`pause`), as this machine numbers it.
    init: u32,
}

/// What the started node tells its users.
#[derive(Debug, Clone)]
pub struct Started {
    /// The node's registry, `host:port` (reachable from this machine and from Pods).
    pub registry: String,
    /// The registry's folder (its log and storage).
    pub registry_dir: PathBuf,
}

/// Runs `argv` to its end; an error naming it and quoting its stderr when it fails.
fn run(argv: &[String]) -> Result<()> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| Error::Cluster("an empty command".into()))?;
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::Cluster(format!("running {}: {e}", argv.join(" "))))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Cluster(format!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// `argv` run inside the node's mount and network namespaces (one-shot set-up commands).
fn inside(init: u32, argv: &[String]) -> Vec<String> {
    let mut all: Vec<String> = [
        "nsenter",
        "--target",
        &init.to_string(),
        "--mount",
        "--net",
        "--",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    all.extend(argv.iter().cloned());
    all
}

/// A component of the node: `argv` in all of its namespaces, PID included, with the node's
/// `PATH`. nsenter forks to enter the PID namespace; the program dies with that nsenter
/// (`--pdeathsig`), which dies with the supervisor, and in any case with the node's init.
fn component(node: &Node, name: &'static str, argv: Vec<String>) -> Component {
    let mut all: Vec<String> = [
        "nsenter",
        "--target",
        &node.init.to_string(),
        "--mount",
        "--net",
        "--pid",
        "--",
        "setpriv",
        "--pdeathsig",
        "KILL",
        "--",
        "env",
        &format!("PATH={}", node.layout.path_env()),
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    all.extend(argv);
    Component { name, argv: all }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The child processes of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Starts the node's namespaces and wires its network: before the control plane, whose
/// addresses depend on the node's.
pub async fn prepare(
    dir: &Path,
    bins: &Binaries,
    children: &Children,
    step: &Step,
) -> Result<Node> {
    let layout = Layout {
        dir: dir.join(FOLDER),
    };
    std::fs::create_dir_all(&layout.dir).map_err(io_error(&layout.dir))?;
    let pause = bins.pause.join("pause").display().to_string();
    children.start(Component {
        name: HOLDER,
        argv: strings(&[
            "unshare",
            "--net",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child=KILL",
            "--propagation",
            "private",
            "--mount-proc",
            &pause,
            // pause ignores its arguments: this one names the cluster's folder in the
            // holder's command line, where a search for the cluster's processes looks.
            &layout.dir.display().to_string(),
        ]),
    })?;
    let holder = children
        .pid(HOLDER)
        .ok_or_else(|| Error::Cluster("the node's namespaces exited at once".into()))?;
    wait_until(step, "the node's namespaces", 10, || async {
        !children_of(holder).is_empty()
    })
    .await?;
    let init = children_of(holder)
        .first()
        .copied()
        .ok_or_else(|| Error::Cluster("the node's init is gone".into()))?;

    for folder in ["/run", "/var/lib", "/var/log"] {
        run(&inside(
            init,
            &strings(&["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", folder]),
        ))?;
    }
    let sysctls = layout.path("sysctl");
    std::fs::create_dir_all(&sysctls).map_err(io_error(&sysctls))?;
    for (key, value) in config::KUBELET_SYSCTLS {
        let file = sysctls.join(key.replace('/', "."));
        std::fs::write(&file, format!("{value}\n")).map_err(io_error(&file))?;
        let target = format!("/proc/sys/{key}");
        run(&inside(
            init,
            &strings(&["mount", "--bind", &file.display().to_string(), &target]),
        ))?;
    }
    link_sbin(&layout)?;

    let addresses = allocate(init)?;
    let index_file = layout.path(INDEX_FILE);
    std::fs::write(&index_file, addresses.index.to_string()).map_err(io_error(&index_file))?;
    let cgroup = config::cgroup_root(&addresses);
    // Removes the cgroups when this process is gone, however it ends (waiting first, if a
    // killed run's reaper still cleans up this index).
    reaper::spawn(addresses.index, dir)?;
    cgroups::remove(&cgroup, Duration::ZERO)?;
    cgroups::create(&cgroup)?;
    for command in network::host_commands(&addresses, init).iter().skip(1) {
        run(command)?;
    }
    for command in network::node_commands(&addresses) {
        run(&inside(init, &command))?;
    }
    log(&format!(
        "node namespaces up: {} on {} (this machine {})",
        addresses.node(),
        addresses.host_link(),
        addresses.host()
    ));
    Ok(Node {
        addresses,
        layout,
        init,
    })
}

/// Links [`config::SBIN_TOOLS`] into the node's own `sbin`.
fn link_sbin(layout: &Layout) -> Result<()> {
    let sbin = layout.path("sbin");
    std::fs::create_dir_all(&sbin).map_err(io_error(&sbin))?;
    for tool in config::SBIN_TOOLS {
        let found = ["/usr/sbin", "/sbin", "/usr/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .ok_or_else(|| {
                Error::Cluster(format!(
                    "{tool} is not installed; hack/prereqs.sh installs it (Debian packages \
                     iptables, runc)"
                ))
            })?;
        let link = sbin.join(tool);
        std::os::unix::fs::symlink(&found, &link).map_err(io_error(&link))?;
    }
    Ok(())
}

/// Takes the first free index, starting from one that depends on this process (so that two
/// clusters starting together rarely try the same): the veth's creation fails when another
/// node holds the index.
fn allocate(init: u32) -> Result<Addresses> {
    let first = (std::process::id() % (u32::from(network::MAX_INDEX) + 1)) as u16;
    let mut last = String::new();
    for offset in 0..=u16::from(network::MAX_INDEX) {
        let index = ((first + offset) % (u16::from(network::MAX_INDEX) + 1)) as u8;
        let addresses = Addresses { index };
        let create = &network::host_commands(&addresses, init)[0];
        match run(create) {
            Ok(()) => return Ok(addresses),
            Err(e) if e.to_string().contains("File exists") => last = e.to_string(),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Cluster(format!(
        "every node index is taken on this machine: {last}"
    )))
}

impl Node {
    /// The API server's extra certificate names: its address on the veth, and the
    /// `kubernetes` Service's.
    pub fn api_server_names(&self) -> Vec<String> {
        vec![
            self.addresses.host().to_string(),
            self.addresses.kubernetes_service().to_string(),
        ]
    }

    /// Starts the registry, containerd, the kubelet, kube-proxy and CoreDNS, once the control
    /// plane runs at `server` with `pki` (written to `DIR/pki`), and waits until the node is Ready, Services route and names
    /// resolve.
    pub async fn start(
        &self,
        bins: &Binaries,
        pki: &Pki,
        server: &str,
        client: &kube::Client,
        children: &Children,
        step: &Step,
    ) -> Result<Started> {
        let a = &self.addresses;
        let probe = Probe::new()?;

        let registry_dir = self.layout.path("registry");
        let registry = format!("{}:{}", a.host(), olm_testkit::free_port()?);
        let config = registry_config(&registry_dir, &registry);
        std::fs::create_dir_all(registry_dir.join("storage")).map_err(io_error(&registry_dir))?;
        let config_file = registry_dir.join("config.yml");
        std::fs::write(&config_file, config).map_err(io_error(&config_file))?;
        children.start(Component {
            name: "node-registry",
            argv: strings(&[
                olm_testkit::registry::BINARY,
                "serve",
                &config_file.display().to_string(),
            ]),
        })?;
        let v2 = format!("http://{registry}/v2/");
        wait_until(step, "the node's registry", 30, || probe.ok(&v2)).await?;
        push_pause(bins, &registry, &registry_dir).await?;

        let hosts = self.layout.registry_hosts().join(&registry);
        std::fs::create_dir_all(&hosts).map_err(io_error(&hosts))?;
        write(
            &hosts.join("hosts.toml"),
            &config::registry_hosts(&registry),
        )?;
        let cni = self.layout.cni();
        std::fs::create_dir_all(&cni).map_err(io_error(&cni))?;
        let conflist = network::cni_config(a, "/var/lib/cni/networks").to_string();
        write(&cni.join("10-olm-rs.conflist"), &conflist)?;
        let containerd_toml = self.layout.path("containerd.toml");
        write(
            &containerd_toml,
            &config::containerd(&self.layout, &registry),
        )?;
        children.start(component(
            self,
            "containerd",
            strings(&[
                "containerd",
                "--config",
                &containerd_toml.display().to_string(),
            ]),
        ))?;
        let socket = PathBuf::from(format!(
            "/proc/{}/root{}",
            self.init,
            config::CONTAINERD_SOCKET
        ));
        wait_until(step, "containerd", 30, || {
            let exists = socket.exists();
            async move { exists }
        })
        .await?;

        let kubeconfig_of = |name: &str, user: &pki::Pair| {
            let path = self.layout.path(&format!("{name}.kubeconfig"));
            kubeconfig::write(&kubeconfig::client(server, pki, user), &path).map(|()| path)
        };
        let kubelet_kubeconfig = kubeconfig_of("kubelet", &pki.kubelet)?;
        let kubelet_yaml = self.layout.path("kubelet.yaml");
        // The PKI is written beside the node's folder (`DIR/pki`).
        let pki_dir = self
            .layout
            .dir
            .parent()
            .unwrap_or(&self.layout.dir)
            .join("pki");
        let ca = pki_dir.join(pki::files::CA);
        write(&kubelet_yaml, &config::kubelet(&self.layout, a, &ca))?;
        children.start(component(
            self,
            "kubelet",
            vec![
                bins.k8s.join("kubelet").display().to_string(),
                format!("--config={}", kubelet_yaml.display()),
                format!("--kubeconfig={}", kubelet_kubeconfig.display()),
                format!("--root-dir={}", self.layout.path("kubelet").display()),
                format!("--hostname-override={}", config::NODE_NAME),
                format!("--node-ip={}", a.node()),
                "--v=1".into(),
            ],
        ))?;
        let nodes: Api<NodeObject> = Api::all(client.clone());
        wait_until(step, "the node to be Ready", 60, || async {
            nodes
                .get_opt(config::NODE_NAME)
                .await
                .ok()
                .flatten()
                .is_some_and(|n| is_ready(&n))
        })
        .await?;

        let proxy_kubeconfig = kubeconfig_of("kube-proxy", &pki.kube_proxy)?;
        let proxy_yaml = self.layout.path("kube-proxy.yaml");
        write(&proxy_yaml, &config::kube_proxy(a, &proxy_kubeconfig))?;
        children.start(component(
            self,
            "kube-proxy",
            vec![
                bins.k8s.join("kube-proxy").display().to_string(),
                format!("--config={}", proxy_yaml.display()),
                "--v=1".into(),
            ],
        ))?;
        // The `kubernetes` Service answering from this machine shows kube-proxy's rules work.
        let service = std::net::SocketAddr::from((a.kubernetes_service(), 443));
        wait_until(
            step,
            "kube-proxy to route the kubernetes Service",
            60,
            || async move {
                tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio::net::TcpStream::connect(service),
                )
                .await
                .is_ok_and(|c| c.is_ok())
            },
        )
        .await?;

        grant_coredns(client).await?;
        let dns_kubeconfig = kubeconfig_of("coredns", &pki.coredns)?;
        let corefile = self.layout.path("Corefile");
        write(&corefile, &config::corefile(a, &dns_kubeconfig))?;
        children.start(component(
            self,
            "coredns",
            vec![
                bins.coredns.join("coredns").display().to_string(),
                "-conf".into(),
                corefile.display().to_string(),
            ],
        ))?;
        let ready = config::coredns_ready(a);
        wait_until(step, "CoreDNS", 60, || probe.ok(&ready)).await?;
        log(&format!(
            "node {} Ready; registry {registry}",
            config::NODE_NAME
        ));
        Ok(Started {
            registry,
            registry_dir,
        })
    }
}

fn is_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(io_error(path))
}

/// The node registry's configuration: plain HTTP on `host`, its storage and access log in `dir`.
fn registry_config(dir: &Path, host: &str) -> String {
    format!(
        "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
         storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
         http:\n  addr: {host}\n",
        dir.join("storage").display()
    )
}

/// Pushes the sandbox image: the static `pause` alone, as Kubernetes' own image holds it.
async fn push_pause(bins: &Binaries, registry: &str, dir: &Path) -> Result<()> {
    let binary = bins.pause.join("pause");
    let bytes = std::fs::read(&binary).map_err(io_error(&binary))?;
    let layer = olm_testkit::images::tar_layer(&[olm_testkit::images::Entry::Executable(
        "pause".into(),
        bytes,
    )]);
    let (repository, tag) = config::PAUSE_IMAGE;
    olm_testkit::images::push_configured(
        &olm_testkit::registry::Registry::running(registry, dir),
        repository,
        tag,
        &[layer],
        json!({"Entrypoint": ["/pause"], "User": "65535:65535"}),
    )
    .await?;
    Ok(())
}

/// What CoreDNS reads to answer for `cluster.local`, granted to its user.
async fn grant_coredns(client: &kube::Client) -> Result<()> {
    let name = "olm-rs:coredns";
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
             "verbs": ["list", "watch"]},
        ],
    }))
    .map_err(|e| Error::Document(format!("CoreDNS's ClusterRole: {e}")))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": pki::COREDNS_USER}],
    }))
    .map_err(|e| Error::Document(format!("CoreDNS's ClusterRoleBinding: {e}")))?;
    let params = PatchParams::apply("olm-cluster").force();
    Api::<ClusterRole>::all(client.clone())
        .patch(name, &params, &Patch::Apply(&role))
        .await
        .map_err(crate::error::kube_err("granting CoreDNS its reads"))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(name, &params, &Patch::Apply(&binding))
        .await
        .map_err(crate::error::kube_err("granting CoreDNS its reads"))?;
    Ok(())
}

/// Stops the node at once: SIGTERM to its init, whose exit makes the kernel kill every other
/// process of its PID namespace (its holder, `unshare`, ignores SIGTERM while it waits).
pub fn stop(children: &Children) {
    let Some(holder) = children.pid(HOLDER) else {
        return;
    };
    for init in children_of(holder) {
        let _ = Command::new("kill")
            .args(["-TERM", &init.to_string()])
            .status();
    }
}

/// After every process of the cluster is gone: removes the node's cgroups and waits until the
/// kernel has removed its veth (the last trace of its network namespace). Nothing to do when no
/// node ran in `dir`.
pub fn clean_up(dir: &Path) -> Result<()> {
    let index_file = dir.join(FOLDER).join(INDEX_FILE);
    let Some(index) = std::fs::read_to_string(&index_file)
        .ok()
        .and_then(|t| t.trim().parse::<u8>().ok())
    else {
        return Ok(());
    };
    let addresses = Addresses { index };
    cgroups::remove(&config::cgroup_root(&addresses), RELEASE)?;
    let link = PathBuf::from("/sys/class/net").join(addresses.host_link());
    let deadline = std::time::Instant::now() + RELEASE;
    while link.exists() {
        if std::time::Instant::now() >= deadline {
            return Err(Error::Cluster(format!(
                "{} still exists {} s after the node stopped",
                addresses.host_link(),
                RELEASE.as_secs()
            )));
        }
        // The kernel removes a dead namespace's links shortly after; bounded by the deadline.
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_component_runs_in_every_namespace_and_dies_with_its_nsenter() {
        let node = Node {
            addresses: Addresses { index: 2 },
            layout: Layout {
                dir: "/c/node".into(),
            },
            init: 99,
        };
        let c = component(&node, "kubelet", strings(&["/bin/kubelet", "--v=1"]));
        let line = c.argv.join(" ");
        assert!(
            line.starts_with("nsenter --target 99 --mount --net --pid -- setpriv --pdeathsig KILL -- env PATH=/c/node/sbin:"),
            "{line}"
        );
        assert!(line.ends_with("/bin/kubelet --v=1"));
        assert_eq!(
            inside(99, &strings(&["ip", "link"])).join(" "),
            "nsenter --target 99 --mount --net -- ip link"
        );
    }

    #[test]
    fn the_registry_listens_on_the_given_address_only() {
        let c = registry_config(Path::new("/c/node/registry"), "172.30.2.1:5000");
        assert!(c.contains("addr: 172.30.2.1:5000"));
        assert!(c.contains("rootdirectory: /c/node/registry/storage"));
    }
}
