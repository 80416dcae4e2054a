"""The chart's containers run as host processes, as the cluster would run them, for the
control plane of up.sh (which has no node): the container's arguments and environment
are read from the Deployment the API server holds (so from the chart as rendered), and
its ServiceAccount's credentials come from a TokenRequest, in a kubeconfig of their
own. Every call the process makes therefore goes through the RBAC the chart rendered.

Also the thin kubectl wrapper the checks use (`Kube`).
"""
import base64
import json
import os
import signal
import subprocess
import time


class KubeError(Exception):
    pass


class Kube:
    """kubectl with a kubeconfig; JSON in and out."""

    def __init__(self, kubeconfig, kubectl="kubectl"):
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl

    def run(self, *args, stdin=None, check=True, timeout=60):
        proc = subprocess.run([self.kubectl, "--kubeconfig", self.kubeconfig, *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubeError(f"kubectl {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def get(self, kind, name=None, namespace=None, check=True):
        args = ["get", kind] + ([name] if name else []) + ["-o", "json"]
        if namespace:
            args += ["-n", namespace]
        proc = self.run(*args, check=check)
        return json.loads(proc.stdout) if proc.returncode == 0 else None

    def items(self, kind, namespace=None, selector=None):
        """The objects of `kind` (a comma list is fine), in `namespace` or everywhere."""
        args = ["get", kind, "-o", "json"] + (["-n", namespace] if namespace else ["-A"])
        if selector:
            args += ["-l", selector]
        return json.loads(self.run(*args).stdout)["items"]

    def apply(self, objects, server_side=True, check=True):
        """Applies a list of objects (dicts); returns the completed process."""
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        args = ["apply", "-f", "-"] + (["--server-side", "--field-manager", "mcc-e2e"] if server_side else [])
        return self.run(*args, stdin=doc, check=check, timeout=300)

    def server(self):
        cfg = json.loads(self.run("config", "view", "--raw", "--minify", "-o", "json").stdout)
        cluster = cfg["clusters"][0]["cluster"]
        return cluster["server"], cluster["certificate-authority"]

    def token(self, namespace, service_account, audience=None, duration="2h"):
        """A TokenRequest token of a ServiceAccount (audience: the API server's by default)."""
        args = ["-n", namespace, "create", "token", service_account, "--duration", duration]
        if audience:
            args += ["--audience", audience]
        return self.run(*args).stdout.strip()

    def token_kubeconfig(self, namespace, service_account, path):
        """Writes a kubeconfig acting as the ServiceAccount (nothing but its token)."""
        server, ca = self.server()
        token = self.token(namespace, service_account)
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config",
                       "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": ca}}],
                       "users": [{"name": "u", "user": {"token": token}}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
                       "current-context": "c"}, f)
        os.chmod(path, 0o600)
        return path


def container(kube, namespace, deployment, name):
    """The Deployment's pod spec and its container `name`, as the API server holds them."""
    spec = kube.get("deployment", deployment, namespace)["spec"]["template"]["spec"]
    for c in spec["containers"]:
        if c["name"] == name:
            return spec, c
    raise KubeError(f"deployment {namespace}/{deployment} has no container {name!r}")


def resolve_env(kube, namespace, c, pod_name):
    """The container's environment as the kubelet would build it: literal values with
    `$(VAR)` expanded from earlier entries, and valueFrom (fieldRef of the pod, Secret and
    ConfigMap keys). envFrom is refused: the chart's containers use none."""
    if c.get("envFrom"):
        raise KubeError(f"container {c['name']}: envFrom is not supported by hostpod.py")
    env = {}
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    for e in c.get("env", []):
        if "value" in e:
            value = e["value"]
            for k, v in env.items():
                value = value.replace(f"$({k})", v)
        elif "valueFrom" in e:
            src = e["valueFrom"]
            if "fieldRef" in src:
                value = fields[src["fieldRef"]["fieldPath"]]
            elif "secretKeyRef" in src or "configMapKeyRef" in src:
                kind = "secret" if "secretKeyRef" in src else "configmap"
                ref = src.get("secretKeyRef") or src.get("configMapKeyRef")
                obj = kube.get(kind, ref["name"], namespace, check=not ref.get("optional"))
                data = (obj or {}).get("data") or {}
                if ref["key"] not in data:
                    if ref.get("optional"):
                        continue
                    raise KubeError(f"{kind} {namespace}/{ref['name']} has no key {ref['key']!r}")
                value = data[ref["key"]]
                if kind == "secret":
                    value = base64.b64decode(value).decode()
            else:
                raise KubeError(f"env {e['name']}: unsupported valueFrom {list(src)}")
        else:
            value = ""
        env[e["name"]] = value
    return env


class HostPod:
    """One container of a Deployment, run as a host process with its ServiceAccount."""

    def __init__(self, kube, namespace, deployment, container_name, binary, name, workdir,
                 overrides=None, pid_dir=None, service_account=True):
        spec, c = container(kube, namespace, deployment, container_name)
        self.name = name
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir}
        self.env.update(resolve_env(kube, namespace, c, pod_name=name))
        if service_account:
            sa = spec.get("serviceAccountName", "default")
            self.env["KUBECONFIG"] = kube.token_kubeconfig(namespace, sa, os.path.join(workdir, f"{name}.kubeconfig"))
        self.env.update(overrides or {})
        self.argv = [binary] + c.get("args", [])
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.pid_dir = pid_dir
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if self.pid_dir:
            with open(os.path.join(self.pid_dir, f"e2e-{self.name}"), "w") as f:
                f.write(str(self.proc.pid))
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, wait=10):
        if self.alive():
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.pid_dir:
            try:
                os.remove(os.path.join(self.pid_dir, f"e2e-{self.name}"))
            except FileNotFoundError:
                pass

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""


def wait_for(predicate, timeout, interval=0.1):
    """Polls until predicate() is truthy; returns (value, seconds) or (None, timeout)."""
    start = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value, time.monotonic() - start
        if time.monotonic() - start > timeout:
            return None, timeout
        time.sleep(interval)
