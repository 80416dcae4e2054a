"""The pod runtime under the kubelet (node_e2e.py, issue 31): `runtime: pod` Tools (exec,
curl, fn) in a namespace enforcing Pod Security `restricted`, called through the
gateway's Service. Every call's Pod really runs (the executor image as tool image and
runner, imported into the node's containerd), its result comes back through `pods/log`
(API server -> kubelet over TLS); params and the caller's context reach the process and
never appear in any version of a Pod object (a watch records them all); a timeout, an
out-of-memory kill and an image that cannot be pulled come back as docs/execution.md
("Pod runtime") says; the kubelet enforces a tool Pod's `activeDeadlineSeconds` on its
own; nothing is left behind."""
import asyncio
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

from harness import NS, tool
from hostpod import wait_for
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

PODS = "mcc-node-pods"  # node-e2e.sh creates it with pod-security enforce=restricted
MANAGED = "app.kubernetes.io/managed-by=mcc-gateway"
# Markers that must reach the process and never a Pod object.
PARAM = "param-marker-7f3a"
CONTEXT = "context-marker-91c2"
ABSENT_IMAGE = "localhost/mcc-absent:1"  # nothing serves localhost:443: ErrImagePull at once


def post(base, key, credential, params, host, timeout=90):
    req = urllib.request.Request(f"{base}/v1/tools/{key}", method="POST", data=json.dumps(params).encode(),
                                 headers={"Authorization": f"Bearer {credential}", "Host": host,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body
    except OSError as e:
        return 0, str(e)


def served(base, key, credential, host):
    """Whether GET /v1/tools/{key} (its description; nothing runs) answers 200."""
    req = urllib.request.Request(f"{base}/v1/tools/{key}", headers={"Authorization": f"Bearer {credential}",
                                                                    "Host": host})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


class PodRecorder:
    """`kubectl get pods --watch -o json` over the pod namespace: every version of every
    Pod the API server hands out while the calls run."""

    def __init__(self, kube):
        self.proc = subprocess.Popen([kube.kubectl, "--kubeconfig", kube.kubeconfig, "-n", PODS, "get", "pods",
                                      "--watch", "--output-watch-events", "-o", "json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.text = []
        self.thread = threading.Thread(target=lambda: self.text.extend(self.proc.stdout), daemon=True)
        self.thread.start()

    def stop(self):
        time.sleep(1)  # the last deletions' events
        self.proc.terminate()
        self.thread.join(5)
        return "".join(self.text)


def pod_tools(port):
    small = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
    pod = {"pod": {"resources": small}}
    return [
        tool("pod-exec", PODS, {
            "name": "pod_exec", "groups": ["public"], "runtime": pod, "sessionKeys": ["target"],
            "exec": 'echo "out={{ msg }} user=$MCC_CTX_USER target=$MCC_CTX_TARGET uid=$(id -u)"; '
                    'echo "err={{ msg }}" >&2; exit {{ code }}',
            "params": [{"name": "msg", "type": "str", "required": True},
                       {"name": "code", "type": "int", "required": True}]}),
        tool("pod-curl", PODS, {
            "name": "pod_curl", "groups": ["public"], "runtime": pod,
            "curl": f"http://mcc-gateway.{NS}.svc:{port}/healthz?probe={{{{ msg }}}}",
            "params": [{"name": "msg", "type": "str", "required": True}]}),
        # An fn tool: os.getenv in the image's python3, declared (nobody introspects a pod fn).
        tool("pod-fn", PODS, {
            "name": "pod_fn", "groups": ["public"], "runtime": pod, "sessionKeys": ["target"],
            "fn": "os:getenv", "returnType": "str",
            "params": [{"name": "key", "type": "str", "required": True}]}),
        tool("pod-slow", PODS, {
            "name": "pod_slow", "groups": ["public"], "runtime": pod, "exec": "sleep 120",
            "limits": {"timeout": 8}}),
        tool("pod-oom", PODS, {
            "name": "pod_oom", "groups": ["public"], "runtime": pod,
            "exec": "python3 -c 'b = bytearray(b\"x\") * (300 << 20); print(len(b))'"}),
        tool("pod-pull", PODS, {
            "name": "pod_pull", "groups": ["public"], "exec": "true", "limits": {"timeout": 60},
            "runtime": {"pod": {"image": ABSENT_IMAGE, "resources": small}}}),
    ]


async def mcp_with_context(base, credential, host):
    """One legacy MCP session: a session variable set, then the exec and fn pod Tools."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}", "Host": host})
    out = []

    def text(r):
        return "".join(getattr(p, "text", "") for p in r.content), bool(r.is_error)
    async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode="legacy") as c:
        await c.call_tool("set_session", {"name": "target", "value": CONTEXT})
        out.append(text(await c.call_tool("execute", {"key": "public.pod_exec",
                                                      "params": {"msg": PARAM, "code": 0}})))
        out.append(text(await c.call_tool("execute", {"key": "public.pod_fn", "params": {"key": "MCC_CTX"}})))
    return out


def run(kube, check, base, key, host, port):
    recorder = PodRecorder(kube)
    try:
        calls(kube, check, base, key, host, port)
    finally:
        history = recorder.stop()
    versions = history.count('"kind":"Pod"')
    check(f"no version of any call's Pod holds a param or the caller's context ({versions} Pod versions "
          "watched)", versions > 0 and PARAM not in history and CONTEXT not in history,
          f"param seen: {PARAM in history}, context seen: {CONTEXT in history}")
    left, _ = wait_for(lambda: not kube.items("pods,secrets", PODS, MANAGED), 30, 0.5)
    rest = [f"{o['kind']}/{o['metadata']['name']}" for o in kube.items("pods,secrets", PODS)]
    check(f"no Pod and no Secret left in {PODS} after the calls", bool(left) and not rest, rest[:5])


def calls(kube, check, base, key, host, port):
    ns = kube.get("namespace", PODS)
    labels = ns["metadata"].get("labels") or {}
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": PODS},
             "spec": {"containers": [{"name": "c", "image": "localhost/mcc-busybox:1"}]}}
    proc = kube.apply([plain], check=False)
    check(f"{PODS} enforces Pod Security `restricted` (a plain Pod is refused)",
          labels.get("pod-security.kubernetes.io/enforce") == "restricted"
          and proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr.strip()[-200:])

    kube.apply(pod_tools(port))
    names = [t["spec"]["name"] for t in pod_tools(port)]
    ready, took = wait_for(lambda: all(served(base, f"public.{n}", key, host) for n in names), 60, 0.5)
    check(f"the six pod Tools are Ready and served ({took:.1f} s)", bool(ready))

    t0 = time.monotonic()
    status, body = post(base, "public.pod_exec", key, {"msg": PARAM, "code": 3}, host)
    took = time.monotonic() - t0
    b = body if isinstance(body, dict) else {}
    check(f"exec in a Pod under the kubelet: stdout, stderr and exit code 3 come back through pods/log "
          f"({took:.1f} s)",
          status == 200 and b.get("exit_code") == 3 and f"out={PARAM} user=alice" in b.get("stdout", "")
          and "uid=65533" in b.get("stdout", "") and b.get("stderr") == f"err={PARAM}\n", (status, body))

    try:
        texts = asyncio.run(mcp_with_context(base, key, host))
    except Exception as e:  # noqa: BLE001 - the check reads the text
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        texts = [(f"{type(e).__name__}: {e}", True)] * 2
    (text, err), (ctx, ctx_err) = texts
    check("exec over MCP: the param and the session's context (sessionKeys) reach the process",
          not err and f"out={PARAM} user=alice target={CONTEXT}" in text, text[:300])
    try:
        ctx_seen = json.loads(json.loads(ctx)) if ctx.startswith('"') else json.loads(ctx)
    except ValueError:
        ctx_seen = {}
    check("fn (os:getenv in the image's python3) in a Pod reads MCC_CTX: the caller and the variable",
          not ctx_err and ctx_seen.get("user") == "alice" and ctx_seen.get("target") == CONTEXT, ctx[:300])

    status, body = post(base, "public.pod_curl", key, {"msg": PARAM}, host)
    check("curl in a Pod reaches the gateway's Service by its name (cluster DNS from the tool Pod)",
          status == 200 and isinstance(body, dict) and body.get("result") == "ok", (status, body))

    timeout_call(kube, check, base, key, host)

    t0 = time.monotonic()
    status, body = post(base, "public.pod_oom", key, {}, host)
    b = body if isinstance(body, dict) else {}
    # `sh -c` ran python3, which the kernel killed: the shell reports 128 + 9.
    check(f"a Pod out of memory comes back as the failure [137, …] with stderr `OOMKilled: … (limit 64Mi)` "
          f"({time.monotonic() - t0:.1f} s)",
          status == 200 and b.get("exit_code") == 137 and b.get("stderr", "").startswith(
              "OOMKilled: the tool's Pod ran out of memory (limit 64Mi); raise the Tool's "
              "runtime.pod.resources.limits.memory"), (status, body))

    t0 = time.monotonic()
    status, body = post(base, "public.pod_pull", key, {}, host)
    took = time.monotonic() - t0
    message = body.get("message", "") if isinstance(body, dict) else str(body)
    check(f"an image that cannot be pulled fails the call without waiting for its timeout, naming the image "
          f"({took:.1f} s of 60 s)", status == 500 and took < 30 and "tool 'public.pod_pull': pod mcc-node-pods/"
          f"mcc-public-pod-pull-" in message and f": image {ABSENT_IMAGE} could not be pulled: " in message,
          (status, message[:400]))


def timeout_call(kube, check, base, key, host):
    """The slow Tool (timeout 8 s): its Pod carries activeDeadlineSeconds 8, the call ends
    as a local timeout and the Pod is deleted. A copy of that Pod and its Secret, made
    while the call runs and left to the kubelet alone, is ended by the kubelet at its
    deadline (the backstop should the gateway vanish)."""
    result = {}
    t = threading.Thread(target=lambda: result.update(r=post(base, "public.pod_slow", key, {}, host)))
    t0 = time.monotonic()
    t.start()

    def created():  # the call's Pod and its Secret (the copy needs both)
        pods = kube.items("pods", PODS, MANAGED)
        secret = pods and kube.get("secret", pods[0]["metadata"]["name"], PODS, check=False)
        return secret and (pods, secret)
    found, _ = wait_for(created, 8, 0.2)
    pods, copy = [], None
    if found:
        pods, secret = found
        copy = backstop_copy(pods[0], secret)
        kube.apply(copy)
    t.join(60)
    took = time.monotonic() - t0
    status, body = result.get("r", (0, "no answer"))
    b = body if isinstance(body, dict) else {}
    deadline = pods[0]["spec"].get("activeDeadlineSeconds") if pods else None
    check(f"a timeout (8 s) ends the call as [-1, \"\", \"timeout after 8s\"] ({took:.1f} s); the Pod had "
          "activeDeadlineSeconds 8", status == 200 and b.get("exit_code") == -1
          and "timeout after 8s" in b.get("stderr", "") and deadline == 8, (status, body, deadline))
    if pods:
        name = pods[0]["metadata"]["name"]
        gone, _ = wait_for(lambda: kube.get("pod", name, PODS, check=False) is None, 15, 0.3)
        check("... and the gateway deleted its Pod", bool(gone))

    def deadline_exceeded():
        p = kube.get("pod", "backstop", PODS, check=False) or {}
        st = p.get("status") or {}
        return st.get("phase") == "Failed" and st.get("reason") == "DeadlineExceeded" and st
    ended, _ = wait_for(deadline_exceeded, 40, 0.5) if copy else (None, 0)
    check("a copy of that Pod left to the kubelet alone is stopped at activeDeadlineSeconds "
          "(phase Failed, DeadlineExceeded)", bool(ended),
          (kube.get("pod", "backstop", PODS, check=False) or {}).get("status"))
    kube.run("-n", PODS, "delete", "pod,secret", "backstop", "--grace-period=0", "--ignore-not-found",
             "--wait=true", check=False)


def backstop_copy(pod, secret):
    """The call's Pod and Secret under the name `backstop`, without owners or status."""
    if not secret:
        return None
    spec = json.loads(json.dumps(pod["spec"]))
    for k in ("nodeName",):
        spec.pop(k, None)
    for v in spec.get("volumes") or []:
        if "secret" in v:
            v["secret"]["secretName"] = "backstop"
    meta = {"name": "backstop", "namespace": PODS}
    return [{"apiVersion": "v1", "kind": "Secret", "metadata": dict(meta), "type": secret.get("type", "Opaque"),
             "data": secret.get("data") or {}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta), "spec": spec}]
