//! olm-cluster: the local control plane of the tests and the demo, a program of its own:
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler as plain processes on
//! 127.0.0.1, on free ports, with a throw-away PKI, and (unless `--no-node`) a real node ([`node`]: containerd, the
//! kubelet, kube-proxy and CoreDNS in namespaces of their own, with a registry), supervised by
//! the `olm-cluster` binary (`tools/testbin/cluster.sh` builds and runs it). The binaries come
//! from `tools/testbin/build.sh` (a Go build, cached by version).
//!
//! * `olm-cluster run DIR [--crds CRD_DIR]` runs the control plane in the foreground as its
//!   [`supervisor`]: it prints `ready` on stdout once it is up (`DIR/env` then holds shell
//!   assignments: `KUBECONFIG`, `OLM_E2E_API_URL`, ...), and stops it when its stdin reaches
//!   end of file or reads a `stop` line, or on SIGTERM, SIGINT or SIGHUP ([`stop`]). Whoever
//!   holds the write end of its stdin owns the cluster: when that process dies, for whatever
//!   reason, the pipe closes and the cluster stops. CRDs in `CRD_DIR` are applied before the
//!   controller manager starts, so its garbage collector knows their kinds from its first
//!   discovery (it reads discovery again only every 30 s).
//! * `olm-cluster start DIR [--crds CRD_DIR]` and `olm-cluster stop DIR`: the same supervisor,
//!   [`detached`] from the shell.
//!
//! Leak-free by construction: stop requests (signals included) are messages, never
//! interruptions, so the clean-up always runs to its end; every component dies with the
//! supervisor ([`children`]); a stop, or a start that fails half way, removes everything in
//! `DIR` but `DIR/logs` ([`folder`]).
//!
//! Its modules: [`command`] (the command line), [`supervisor`] (the start, in order),
//! [`components`] (each component's command line), [`node`] (the node: containerd, the
//! kubelet, kube-proxy, CoreDNS, its namespaces, cgroups and veth), [`pki`] and
//! [`kubeconfig`] (the throw-away PKI, made with olm-testkit's rcgen [`olm_testkit::pki`], and
//! kube's own kubeconfig type), [`crds`] (the CRDs it starts with), [`step`] (what the start
//! waits for), [`stop`], [`children`], [`detached`] and [`folder`] (how it ends without
//! leaks); [`error`], [`client`] and [`log`], what they all share.

pub mod children;
pub mod client;
pub mod command;
pub mod components;
pub mod crds;
pub mod detached;
pub mod error;
pub mod folder;
pub mod kubeconfig;
pub mod log;
pub mod node;
pub mod pki;
pub mod step;
pub mod stop;
pub mod supervisor;

pub use client::{client_for, install_crypto_provider};
pub use command::{Command, main};
pub use error::{Error, Result, kube_err};
pub use log::log;
