#!/usr/bin/env python3
"""A real local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler as plain processes on 127.0.0.1, on free ports, with a throw-away PKI.

  cluster.py run DIR [--crds CRD_DIR]
      Runs the control plane in the foreground, as its supervisor. Prints `ready` on stdout once
      it is up (DIR/env then holds shell assignments: KUBECONFIG, OLM_E2E_API_URL, ...), and
      stops it when its stdin reaches end of file or reads a `stop` line, or on SIGTERM, SIGINT
      or SIGHUP. Whoever holds the write end of its stdin owns the cluster: when that process
      dies, for whatever reason, the pipe closes and the cluster stops. CRDs in CRD_DIR are
      applied before the controller manager starts, so its garbage collector knows their kinds
      from the first discovery (it re-reads discovery only every 30 s).
  cluster.py start DIR [--crds CRD_DIR]
      `run`, detached in a session of its own and reading DIR/control (a FIFO); returns once the
      cluster is ready. For a cluster that outlives the shell (the demo's OLM_DEMO_KEEP).
  cluster.py stop DIR
      Asks DIR's supervisor to stop (a line on DIR/control) and waits until it has.

Leak-free by construction:
  * clean-up is armed before the first process starts (signal handlers and try/finally);
  * every component runs with the supervisor's death as its parent-death signal
    (`setpriv --pdeathsig KILL`), so even a supervisor killed outright takes them with it;
  * components are signalled only through their `Popen` handle: Python reaps a child only when
    asked to, so an unreaped child's PID cannot have been reused, and a reaped one is never
    signalled again;
  * a stop, or a start that fails half way, removes everything in DIR but DIR/logs.

Why Python and not bash: bash reaps its children behind the script's back, and inside a trap
its job table can still name a job that ended, so `kill %N` may signal a PID that is no longer
ours. Python's handles cannot.
"""

import base64
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = "supervisor.lock"


def log(message):
    print(f"cluster: {message}", file=sys.stderr, flush=True)


class Failure(Exception):
    """Start-up failed; the message says why."""


class StopRequested(Exception):
    """The owner asked to stop (stdin closed or said `stop`, or a signal)."""


def on_signal(signum, _frame):
    raise StopRequested(f"signal {signal.Signals(signum).name}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stdin:
    """The owner's end: a `stop` line or end of file asks the supervisor to stop. Read
    unbuffered, so `select` sees every byte."""

    def __init__(self):
        self.closed = False
        self.pending = b""

    def stop_requested(self, timeout):
        """Waits up to `timeout` seconds (forever when None) for input; true once asked to stop."""
        if self.closed:
            return True
        ready, _, _ = select.select([0], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(0, 4096)
        self.pending = (self.pending + chunk)[-4096:]
        if chunk == b"" or b"stop" in self.pending.split(b"\n"):
            self.closed = True
        return self.closed


class Supervisor:
    def __init__(self, directory, crds):
        self.dir = directory
        self.crds = crds
        self.logs = os.path.join(directory, "logs")
        self.procs = []  # (name, Popen), in start order
        self.stdin = Stdin()
        self.api_port = None

    # --- processes -------------------------------------------------------------------------

    def start_proc(self, name, *argv):
        out = open(os.path.join(self.logs, f"{name}.log"), "wb")
        proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        self.procs.append((name, proc))

    def stop_all(self):
        for name, proc in reversed(self.procs):
            if proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log(f"{name} ignored SIGTERM for 10 s; killing it")
                proc.kill()
                proc.wait()

    def wait_until(self, what, seconds, check):
        """Polls `check` until it is true or the deadline passes, failing early when a component
        exits or the owner asks to stop."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if check():
                    return
            except Exception:  # not yet: connection refused, 503, ...
                pass
            for name, proc in self.procs:
                if proc.poll() is not None:
                    tail = self.tail(name)
                    raise Failure(
                        f"{name} exited ({proc.returncode}) while waiting for {what}; "
                        f"last lines of {self.logs}/{name}.log:\n{tail}"
                    )
            if time.monotonic() >= deadline:
                raise Failure(f"{what} was not ready within {seconds} s")
            if self.stdin.stop_requested(0.2):
                raise StopRequested(f"asked to stop while waiting for {what}")

    def tail(self, name, lines=30):
        try:
            with open(os.path.join(self.logs, f"{name}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    # --- set-up ----------------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def make_pki(self):
        p = self.path("pki")
        os.makedirs(p)
        sans = ",".join(
            ["IP:127.0.0.1", "IP:10.0.0.1", "DNS:localhost", "DNS:kubernetes"]
            + [
                f"DNS:kubernetes.default{s}"
                for s in ["", ".svc", ".svc.cluster.local"]
            ]
        )
        with open(os.path.join(p, "server.ext"), "w") as f:
            f.write(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                f"extendedKeyUsage=serverAuth\nsubjectAltName={sans}\n"
            )
        with open(os.path.join(p, "client.ext"), "w") as f:
            f.write(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=clientAuth\n"
            )
        steps = [
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 "
            "-subj /CN=olm-rs-test-ca -addext basicConstraints=critical,CA:TRUE "
            "-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            "req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver",
            "x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 "
            "-extfile server.ext -out apiserver.crt",
            "req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj /O=system:masters/CN=olm-rs-admin",
            "x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 "
            "-extfile client.ext -out admin.crt",
            "genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key",
            "pkey -in sa.key -pubout -out sa.pub",
        ]
        with open(os.path.join(self.logs, "pki.log"), "wb") as out:
            for step in steps:
                result = subprocess.run(
                    ["openssl", *shlex.split(step)], cwd=p, stdout=out, stderr=out
                )
                if result.returncode != 0:
                    raise Failure(f"PKI generation failed (openssl {step}); see {self.logs}/pki.log")

    def write_kubeconfig(self):
        def b64(name):
            with open(self.path("pki", name), "rb") as f:
                return base64.b64encode(f.read()).decode()

        with open(self.path("kubeconfig"), "w") as f:
            f.write(
                f"""apiVersion: v1
kind: Config
clusters:
- name: olm-rs-test
  cluster:
    server: https://127.0.0.1:{self.api_port}
    certificate-authority-data: {b64("ca.crt")}
users:
- name: admin
  user:
    client-certificate-data: {b64("admin.crt")}
    client-key-data: {b64("admin.key")}
contexts:
- name: olm-rs-test
  context: {{cluster: olm-rs-test, user: admin}}
current-context: olm-rs-test
"""
            )

    def api(self, method, path, body=None, content_type=None):
        """A request to the API server as the admin; returns the body (raises on errors)."""
        ctx = ssl.create_default_context(cafile=self.path("pki", "ca.crt"))
        ctx.load_cert_chain(self.path("pki", "admin.crt"), self.path("pki", "admin.key"))
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.api_port}{path}", data=body, method=method
        )
        if content_type:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, context=ctx, timeout=10) as response:
            return response.read()

    def apply_crds(self):
        for file in sorted(os.listdir(self.crds)):
            if not file.endswith(".yaml"):
                continue
            with open(os.path.join(self.crds, file), "rb") as f:
                body = f.read()
            name = next(
                line[len("  name: "):].strip()
                for line in body.decode().splitlines()
                if line.startswith("  name: ")
            )
            try:
                self.api(
                    "PATCH",
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                    f"{name}?fieldManager=olm-rs-e2e&force=true",
                    body,
                    "application/apply-patch+yaml",
                )
            except urllib.error.HTTPError as e:
                raise Failure(f"applying CRD {file} failed: {e.read().decode(errors='replace')}")

            def established(name=name):
                crd = json.loads(
                    self.api("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                )
                return any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in crd.get("status", {}).get("conditions", [])
                )

            self.wait_until(f"CRD {name} to be established", 30, established)
            log(f"CRD {name} established")

    def healthy(self, url):
        # The components serve with self-signed certificates; this only asks "are you up?".
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(url, context=ctx, timeout=5) as response:
            return response.status == 200

    def start_cluster(self):
        bins = subprocess.run(
            [os.path.join(HERE, "build.sh"), "all"], check=True, stdout=subprocess.PIPE, text=True
        ).stdout
        env = dict(line.split("=", 1) for line in bins.splitlines() if "=" in line)
        k8s, etcd_bin, helm = (env[k].strip("'\"") for k in ("K8S_BIN", "ETCD_BIN", "HELM_BIN"))
        started = time.monotonic()
        self.make_pki()
        etcd_port, etcd_peer, self.api_port = free_port(), free_port(), free_port()
        kcm_port, sched_port = free_port(), free_port()

        self.start_proc(
            "etcd", f"{etcd_bin}/etcd", "--name=olm-rs", f"--data-dir={self.path('etcd')}",
            "--unsafe-no-fsync", "--log-level=warn",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=olm-rs=http://127.0.0.1:{etcd_peer}", "--listen-metrics-urls=",
        )
        self.wait_until("etcd", 30, lambda: self.healthy(f"http://127.0.0.1:{etcd_port}/health"))

        p = self.path("pki")
        # OLM_TESTBIN_APISERVER_ARGS: extra flags (the harness's own test of a start that fails
        # half way passes a bad one).
        extra = shlex.split(os.environ.get("OLM_TESTBIN_APISERVER_ARGS", ""))
        # Every request that changes something, with its user agent, in audit.log: the tests
        # of leader election read which replica wrote what.
        with open(self.path("audit-policy.yaml"), "w") as policy:
            policy.write(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n- level: None\n  verbs: [get, list, watch]\n- level: Metadata\n"
            )
        self.start_proc(
            "kube-apiserver", f"{k8s}/kube-apiserver", f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={self.api_port}",
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
            f"--tls-cert-file={p}/apiserver.crt", f"--tls-private-key-file={p}/apiserver.key",
            f"--client-ca-file={p}/ca.crt",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p}/sa.pub", f"--service-account-signing-key-file={p}/sa.key",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
            "--allow-privileged=true", f"--cert-dir={self.path('apiserver-certs')}",
            "--kubelet-preferred-address-types=Hostname,InternalIP", "--v=1",
            f"--audit-policy-file={self.path('audit-policy.yaml')}",
            f"--audit-log-path={self.path('audit.log')}", "--audit-log-maxsize=200", *extra,
        )
        self.write_kubeconfig()
        self.wait_until("kube-apiserver /readyz", 90, lambda: self.api("GET", "/readyz") == b"ok")
        log(f"kube-apiserver ready on https://127.0.0.1:{self.api_port} after {time.monotonic() - started:.0f}s")

        if self.crds:
            self.apply_crds()

        kubeconfig = self.path("kubeconfig")
        common = ["--bind-address=127.0.0.1", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "--v=1"]
        self.start_proc(
            "kube-controller-manager", f"{k8s}/kube-controller-manager", f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--controllers=garbage-collector-controller,namespace-controller,deployment-controller,"
            "replicaset-controller,serviceaccount-controller",
            f"--secure-port={kcm_port}", *common,
        )
        self.start_proc(
            "kube-scheduler", f"{k8s}/kube-scheduler", f"--kubeconfig={kubeconfig}",
            "--leader-elect=false", f"--secure-port={sched_port}", *common,
        )
        self.wait_until("kube-controller-manager", 60, lambda: self.healthy(f"https://127.0.0.1:{kcm_port}/healthz"))
        self.wait_until("kube-scheduler", 60, lambda: self.healthy(f"https://127.0.0.1:{sched_port}/healthz"))
        # The serviceaccount controller creating `default` shows the controllers really run.
        self.wait_until(
            "serviceaccount default/default", 60,
            lambda: self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default"),
        )
        version = json.loads(self.api("GET", "/version"))["gitVersion"]
        with open(self.path("env"), "w") as f:
            f.write(
                f"KUBECONFIG={kubeconfig}\nOLM_E2E_API_URL=https://127.0.0.1:{self.api_port}\n"
                f"OLM_E2E_API_VERSION={version}\nOLM_E2E_CLUSTER_DIR={self.dir}\n"
                f"OLM_E2E_HELM={helm}/helm\n"
            )
        log(f"control plane {version} up in {time.monotonic() - started:.0f}s; kubeconfig: {kubeconfig}")


def remove_state(directory, keep):
    """Removes every entry of `directory` but those named in `keep`."""
    for name in os.listdir(directory):
        if name in keep:
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def lock_is_held(directory):
    """True while a supervisor of `directory` runs (it holds the lock for its whole life)."""
    try:
        fd = os.open(os.path.join(directory, LOCK), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def cmd_run(directory, crds):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    lock = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"a control plane already runs in {directory} (stop it with: cluster.sh stop {directory})")
        return 1
    sup = Supervisor(directory, crds)
    status = 0
    try:
        # Leftovers of an earlier run; `control` may be the FIFO `start` gave us as stdin.
        remove_state(directory, {"logs", LOCK, "control"})
        os.makedirs(sup.logs, exist_ok=True)
        sup.start_cluster()
        print("ready", flush=True)
        open(sup.path("ready"), "w").close()
        while not sup.stdin.stop_requested(None):
            pass
        log("stopping (asked to, or the owner of its stdin exited)")
    except StopRequested as e:
        log(f"stopping: {e}")
        status = 1 if not os.path.exists(sup.path("ready")) else 0
    except (Failure, subprocess.CalledProcessError, OSError, KeyError) as e:
        log(str(e))
        status = 1
    finally:
        # Signals during clean-up would cut it short; it is bounded (10 s per component).
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        sup.stop_all()
        remove_state(directory, {"logs", LOCK})
        # Last: a waiting `stop` returns once the lock is released, when this process exits.
        os.unlink(os.path.join(directory, LOCK))
        if sup.procs:
            log(f"stopped; logs kept in {sup.logs}")
    return status


def cmd_start(directory, crds):
    if lock_is_held(directory):
        log(f"a control plane already runs in {directory} (stop it with: cluster.sh stop {directory})")
        return 1
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    for name in ("control", "ready"):
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass
    control = os.path.join(directory, "control")
    os.mkfifo(control)
    # Opened read-write, the FIFO never reaches end of file: only a `stop` line stops it.
    fifo = os.open(control, os.O_RDWR)
    args = [sys.executable, os.path.abspath(__file__), "run", directory]
    if crds:
        args += ["--crds", crds]
    with open(os.path.join(directory, "logs", "supervisor.log"), "wb") as out:
        proc = subprocess.Popen(args, stdin=fifo, stdout=out, stderr=out, start_new_session=True)
    os.close(fifo)
    deadline = time.monotonic() + 600
    while not os.path.exists(os.path.join(directory, "ready")):
        if proc.poll() is not None:
            with open(os.path.join(directory, "logs", "supervisor.log"), errors="replace") as f:
                sys.stderr.write(f.read())
            log(f"the control plane did not start; logs in {directory}/logs")
            return 1
        if time.monotonic() > deadline:
            cmd_stop(directory)
            log("the control plane was not ready within 600 s")
            return 1
        time.sleep(0.2)
    with open(os.path.join(directory, "logs", "supervisor.log"), errors="replace") as f:
        sys.stderr.write("".join(l for l in f if l.strip() != "ready"))
    return 0


def cmd_stop(directory):
    if not lock_is_held(directory):
        log(f"nothing runs in {directory}")
        return 0
    control = os.path.join(directory, "control")
    if not os.path.exists(control):
        log(f"{directory} was started with `run`: stop it by closing its stdin")
        return 1
    fd = os.open(control, os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"stop\n")
    os.close(fd)
    deadline = time.monotonic() + 120
    while lock_is_held(directory):
        if time.monotonic() > deadline:
            log(f"the control plane in {directory} did not stop within 120 s")
            return 1
        time.sleep(0.2)
    log(f"stopped; logs kept in {directory}/logs")
    return 0


def main(argv):
    usage = "usage: cluster.sh run|start DIR [--crds CRD_DIR] | cluster.sh stop DIR"
    if len(argv) < 2:
        log(usage)
        return 2
    action, directory, rest = argv[0], argv[1], argv[2:]
    os.makedirs(directory, exist_ok=True)
    directory = os.path.abspath(directory)
    crds = None
    if rest[:1] == ["--crds"] and len(rest) == 2:
        crds = os.path.abspath(rest[1])
    elif rest:
        log(f"unknown arguments {rest}; {usage}")
        return 2
    if action == "run":
        return cmd_run(directory, crds)
    if action == "start":
        return cmd_start(directory, crds)
    if action == "stop":
        return cmd_stop(directory)
    log(usage)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
