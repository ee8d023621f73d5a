//! The harness itself is leak-free: a test run killed outright at any point, or a control plane
//! that fails half way through its start, leaves no process and nothing but logs behind: no
//! mount, no network link, route, iptables rule or cgroup of its node, and this machine's kernel
//! settings as they were.
//!
//! Each case runs a child copy of this test binary (the ignored `child` test below) that uses
//! the harness as a real test would, in a folder of its own, and kills it or lets it fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the child does, from `OLM_E2E_HARNESS_CHILD`.
const MODE_ENV: &str = "OLM_E2E_HARNESS_CHILD";

/// One control plane at a time: the cases are slow enough without competing for two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The child: starts the control plane and catalogd as any test does, says `@@UP` (or `@@ERR`
/// and the error),
/// then waits to be killed.
#[test]
#[ignore = "run by the other tests of this file, in a process of its own"]
fn child() {
    let Ok(mode) = std::env::var(MODE_ENV) else {
        return;
    };
    match olm_e2e::cluster::cluster() {
        Ok(_) => {
            if mode == "up" {
                olm_e2e::manager::catalogd().unwrap();
            }
            println!("\n@@UP");
        }
        // One line, so the parent reads it whole.
        Err(e) => println!("\n@@ERR {}", e.to_string().replace('\n', " | ")),
    }
    loop {
        // Waiting to be killed by the parent test.
        std::thread::park();
    }
}

fn run_dir(case: &str) -> PathBuf {
    let dir = olm_e2e::repo_root()
        .join("target/e2e")
        .join(format!("harness-{case}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn spawn_child(mode: &str, dir: &Path, extra_env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(MODE_ENV, mode)
    .env(olm_e2e::cluster::DIR_ENV, dir)
    .env_remove(olm_e2e::cluster::REUSE_ENV)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Processes whose command line names `dir` (every component, the supervisor and catalogd do).
fn processes_in(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// What is left in `dir` besides its logs.
fn leftovers(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "logs")
        .collect()
}

/// What a node could change on this machine, item by item: its links, routes, iptables rules,
/// the kernel settings the kubelet and kube-proxy want, the mounts and the cgroups of nodes.
/// A run leaks when an item appears that was not there before it; an item that goes away
/// belongs to another run ending meanwhile (the previous test binary's cluster may still be
/// stopping when this one starts).
fn host_state() -> BTreeSet<String> {
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("{program}: {e}"))
    };
    let mut state = BTreeSet::new();
    for (what, text) in [
        ("link", run("ip", &["-br", "link"])),
        ("route", run("ip", &["route"])),
        (
            "mount",
            std::fs::read_to_string("/proc/self/mounts").unwrap_or_default(),
        ),
    ] {
        state.extend(text.lines().map(|l| format!("{what} {}", l.trim())));
    }
    // Rules and chains, without the packet counters of the chains' policies.
    for line in run("iptables-save", &[]).lines() {
        if !line.starts_with('#') {
            state.insert(format!(
                "iptables {}",
                line.split(" [").next().unwrap_or(line)
            ));
        }
    }
    for key in [
        "net/ipv4/ip_forward",
        "net/ipv4/conf/all/route_localnet",
        "vm/overcommit_memory",
        "kernel/panic",
        "kernel/panic_on_oops",
    ] {
        let value = std::fs::read_to_string(Path::new("/proc/sys").join(key)).unwrap_or_default();
        state.insert(format!("sysctl {key} = {}", value.trim()));
    }
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for entry in std::fs::read_dir(hierarchy.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("olm-node-") {
                state.insert(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    state
}

/// What `now` has that `before` had not.
fn appeared(before: &BTreeSet<String>, now: &BTreeSet<String>) -> Vec<String> {
    now.difference(before).cloned().collect()
}

/// The node `dir`'s cluster ran, as its supervisor's log names it ("… on olm-node-3 …").
fn node_link(dir: &Path) -> Option<String> {
    let log = std::fs::read_to_string(dir.join("logs/supervisor.log")).ok()?;
    let at = log.find(" on olm-node-")? + " on ".len();
    let link: String = log[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(link)
}

/// Waits (up to 60 s) until no process runs in `dir`, only its logs are left, and this machine
/// is as `before` (see [`host_state`]) said.
fn assert_nothing_left_since(dir: &Path, before: &BTreeSet<String>) {
    assert_nothing_left(dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let changed = appeared(before, &host_state());
        if changed.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "30 s after the run ended this machine still has what it had not before: {changed:#?}"
        );
        // Polling the kernel's view while it releases a dead node, bounded by the deadline.
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits (up to 60 s) until no process runs in `dir` and only its logs are left.
fn assert_nothing_left(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (procs, files) = (processes_in(dir), leftovers(dir));
        if procs.is_empty() && files.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "60 s after the run ended, {} still holds {files:?} and these processes run:\n{}",
            dir.display(),
            procs.join("\n")
        );
        // Polling /proc for processes that are stopping, bounded by the deadline.
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        dir.join("logs/kube-apiserver.log").exists() || dir.join("logs/etcd.log").exists(),
        "the logs were not kept"
    );
    if let Some(link) = node_link(dir) {
        let cgroups: Vec<_> = std::fs::read_dir("/sys/fs/cgroup")
            .unwrap()
            .flatten()
            .map(|h| h.path().join(&link))
            .filter(|p| p.exists())
            .collect();
        assert!(
            cgroups.is_empty(),
            "the node's cgroups are left: {cgroups:?}"
        );
        assert!(
            !Path::new("/sys/class/net").join(&link).exists(),
            "the node's link {link} is left"
        );
    }
    let needle = dir.display().to_string();
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect();
    assert!(mounts.is_empty(), "mounts are left: {mounts:#?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Waits (up to `seconds`) until `cond` holds.
fn wait_until(what: &str, seconds: u64, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !cond() {
        assert!(Instant::now() < deadline, "{what} within {seconds} s");
        // Polling the file system, bounded by the deadline.
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_test_run_killed_while_the_control_plane_starts_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("mid-start");
    let before = host_state();
    let mut child = spawn_child("start", &dir, &[]);
    // etcd runs and the API server is starting: kill the test run outright.
    wait_until("etcd started", 120, || dir.join("logs/etcd.log").exists());
    assert!(
        !processes_in(&dir).is_empty(),
        "the control plane's processes were not found, so this test could not fail"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_nothing_left_since(&dir, &before);
}

#[test]
fn a_test_run_killed_with_the_control_plane_and_catalogd_up_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("up");
    let before = host_state();
    let mut child = spawn_child("up", &dir, &[]);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let first = stdout
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("@@"));
    assert_eq!(first.as_deref(), Some("@@UP"), "the child did not come up");
    let running = processes_in(&dir);
    assert!(
        running.iter().any(|p| p.contains("catalogd")),
        "catalogd is not running: {running:#?}"
    );
    assert!(
        running.iter().any(|p| p.contains("kube-apiserver")),
        "{running:#?}"
    );
    assert!(dir.join("catalogd/storage").exists() || dir.join("catalogd").exists());
    // The node ran, with its own processes, a link and cgroups on this machine: the test
    // below could fail.
    assert!(
        running.iter().any(|p| p.contains("kubelet"))
            && running.iter().any(|p| p.contains("containerd")),
        "{running:#?}"
    );
    let link = node_link(&dir).expect("the supervisor named no node");
    assert!(
        Path::new("/sys/class/net").join(&link).exists(),
        "no {link}"
    );
    assert!(
        Path::new("/sys/fs/cgroup/memory").join(&link).exists()
            || Path::new("/sys/fs/cgroup").join(&link).exists()
    );
    assert_ne!(
        host_state(),
        before,
        "the node changed nothing this test sees"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_nothing_left_since(&dir, &before);
}

/// The supervisor (`olm-cluster run`) of `dir`'s cluster, by its process id.
fn supervisor_pid(dir: &Path) -> Option<String> {
    processes_in(dir).into_iter().find_map(|p| {
        let (pid, cmdline) = p.split_once(": ")?;
        (cmdline.contains("olm-cluster run ")).then(|| pid.to_owned())
    })
}

/// The supervisor itself killed outright (SIGKILL) while it starts, once the node's cgroups
/// exist: the kernel ends the node, and the node's reaper, which outlives the supervisor,
/// removes the cgroups (they were left until a later run took the same index).
#[test]
fn a_supervisor_killed_outright_during_its_start_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("killed-supervisor");
    let before = host_state();
    let mut child = spawn_child("start", &dir, &[]);
    // Half way: the node's cgroups exist and etcd has started (its log is what is kept).
    wait_until("the node's cgroups exist and etcd runs", 300, || {
        dir.join("logs/etcd.log").exists()
            && node_link(&dir).is_some_and(|link| {
                std::fs::read_dir("/sys/fs/cgroup")
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|h| h.path().join(&link).exists())
            })
    });
    let pid = supervisor_pid(&dir).expect("the supervisor is not running");
    let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(killed.success());

    child.kill().unwrap();
    child.wait().unwrap();
    assert_nothing_left_since(&dir, &before);
}

#[test]
fn a_control_plane_that_fails_half_way_leaves_nothing_and_says_why() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("fails");
    let before = host_state();
    // etcd starts; the API server refuses an unknown flag.
    let mut child = spawn_child(
        "start",
        &dir,
        &[("OLM_TESTBIN_APISERVER_ARGS", "--no-such-flag-olm-rs")],
    );
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let first = stdout
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("@@"))
        .unwrap_or_default();
    assert!(
        first.starts_with("@@ERR"),
        "the control plane started: {first}"
    );
    assert!(
        first.contains("kube-apiserver exited") && first.contains("--no-such-flag-olm-rs"),
        "the error does not say what failed: {first}"
    );
    // The child is still alive (it waits to be killed): the supervisor cleaned up by itself,
    // and the harness reported the failure with the API server's own words.
    assert_nothing_left_since(&dir, &before);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `olm-cluster` itself, as the demo's `OLM_DEMO_KEEP=1` and a developer run it.
fn olm_cluster(args: &[&str]) -> std::process::Output {
    Command::new(olm_e2e::binary("olm-cluster").unwrap())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_started_control_plane_outlives_its_shell_until_stopped() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("detached");
    let before = host_state();
    let path = dir.display().to_string();
    let crds = olm_e2e::repo_root().join("config/crd");
    let started = olm_cluster(&["start", &path, "--crds", &crds.display().to_string()]);
    let said = String::from_utf8_lossy(&started.stderr);
    assert!(started.status.success(), "start failed: {said}");
    // `start` has returned: the control plane runs on without it, its CRDs applied.
    let running = processes_in(&dir);
    assert!(
        running.iter().any(|p| p.contains("kube-apiserver")),
        "nothing runs after start: {said}"
    );
    let kubeconfig = dir.join("kubeconfig");
    olm_e2e::install_crypto_provider();
    let crd_count = olm_e2e::cluster::run_blocking(async move {
        let client = olm_e2e::cluster::client_for(&kubeconfig).await.unwrap();
        let api: kube::Api<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        > = kube::Api::all(client);
        api.list(&Default::default()).await.unwrap().items.len()
    })
    .unwrap();
    assert_eq!(crd_count, olm_api::crds::all().len());
    // A second start in the same folder is refused, and leaves the first alone.
    let again = olm_cluster(&["start", &path]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already runs"));

    let stopped = olm_cluster(&["stop", &path]);
    assert!(
        stopped.status.success(),
        "stop failed: {}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    // `stop` returns once the supervisor has cleaned up (the supervisor's own process may
    // still be exiting).
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    assert_nothing_left_since(&dir, &before);
}

#[test]
fn a_supervisor_signalled_over_and_over_while_it_stops_still_cleans_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("signalled");
    let before = host_state();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let log = std::fs::File::create(dir.join("logs/supervisor.log")).unwrap();
    let mut supervisor = Command::new(olm_e2e::binary("olm-cluster").unwrap())
        .arg("run")
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let stdout = BufReader::new(supervisor.stdout.take().unwrap());
    let ready = stdout.lines().map_while(Result::ok).any(|l| l == "ready");
    assert!(ready, "the control plane did not start");
    // What a dying owner does: its end of the pipe closes and the parent-death SIGTERM comes
    // at the same moment; here SIGTERM keeps coming for as long as the supervisor runs.
    drop(supervisor.stdin.take());
    let mut sent = 0;
    while olm_e2e::process::signal(&mut supervisor, "TERM").unwrap() {
        sent += 1;
        // Spacing the signals out over the whole clean-up.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sent > 1, "the supervisor exited before a second signal");
    assert_nothing_left_since(&dir, &before);
}
