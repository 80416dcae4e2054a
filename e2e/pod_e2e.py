#!/usr/bin/env python3
"""The chart's gateway pod, run for real with podman and driven with the MCP Python SDK.

Run through e2e/pod.sh (it builds the images first). Steps:

1. `helm template` the chart with e2e/pod-values.yaml: the gateway Deployment (gateway +
   executor containers, file-mode catalog from ConfigMaps, API-key auth) and the chart's
   Redis, on free host ports.
2. Adapt the output to podman 4.3 (see `adapt`): keep Deployments, ConfigMaps and Secrets;
   Secrets become ConfigMaps (podman 4.3's kube Secrets crash `kube play` as volumes and
   fail as env); `$(VAR)` references are expanded; Redis gets a free port and the gateway
   reaches it at 127.0.0.1 (host network, no cluster DNS).
3. `podman kube play --network host`, wait for /readyz.
4. Check: 401 without or with a wrong credential; search; an exec and an fn tool run in
   the executor container; sessions (legacy Mcp-Session-Id and 2026-07-28 handles) survive
   a restart of the gateway container; isolation, from inside the executor container
   (`podman exec`) and through tools: no token file, no gateway process, none of the
   gateway's environment, Redis refuses a tool without the password.
5. `podman kube down` (unless --keep).

Exits 0 when every check passed.
"""

import argparse
import asyncio
import base64
import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = "mcce2e"
NAMESPACE = "mcc-e2e"
# The test credential of e2e/pod-values.yaml (only its hash is in the users file).
API_KEY = "mcc_eaf474c33c74_158Rd6P1jEvz7DGu1lPDI9c4mXcUQ5kg"
GATEWAY_DEPLOYMENT = f"{RELEASE}-gateway"
REDIS_DEPLOYMENT = f"{RELEASE}-redis"
# podman 4.3 names a Deployment's pods `<name>-pod-<i>`, their containers `<pod>-<container>`.
GATEWAY_POD = f"{GATEWAY_DEPLOYMENT}-pod-0"
GATEWAY_CTR = f"{GATEWAY_POD}-gateway"
EXECUTOR_CTR = f"{GATEWAY_POD}-executor"
REDIS_CTR = f"{REDIS_DEPLOYMENT}-pod-0-redis"
TOKEN_SECRET = "mcce2e-test-token"
FAKE_TOKEN = "e2e-fake-serviceaccount-token"
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CATALOG_TOOLS = 8  # the tools of e2e/pod-values.yaml

failures = []
timings = {}


def check(label, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else f": {str(detail)[:600]}"), flush=True)
    if not ok:
        failures.append(label)
    return ok


# The VM refuses raising RLIMIT_NOFILE: podman needs a containers.conf with
# default_ulimits = [] (scripts/images.sh writes it).
os.environ.setdefault("CONTAINERS_CONF", os.path.join(
    os.environ.get("MCC_IMAGES_CACHE", os.path.expanduser("~/.cache/mcc-images")), "containers.conf"))


def podman(*args, check_rc=True, capture=True):
    cmd = ["podman", "--runtime", "runc", *args]
    out = subprocess.run(cmd, capture_output=capture, text=True)
    if check_rc and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- rendering for podman


def render(helm, values, gateway_port, extra=()):
    """The chart rendered with `values`; `extra`: more helm arguments (e2e/image_report.py
    sets image tags and the search model)."""
    out = subprocess.run(
        [helm, "template", RELEASE, os.path.join(REPO, "charts/mcc"), "--namespace", NAMESPACE,
         "-f", values, "--set", f"gateway.port={gateway_port}", *extra],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"helm template failed: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def secret_as_configmap(secret):
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": secret["metadata"]["name"]}, "data": data}


def expand_refs(value, env):
    """Kubernetes' `$(VAR)` expansion from earlier literal env entries; `$$` escapes."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def adapt_container(ctr, configmaps, redis_port):
    literal = {}
    for item in ctr.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            # podman 4.3 reads env secrets from its own secret store (JSON); the chart's
            # Secret is a ConfigMap here, so resolve the value directly.
            item.pop("valueFrom")
            item["value"] = configmaps[ref["name"]]["data"][ref["key"]]
        if "value" in item:
            item["value"] = expand_refs(str(item["value"]), literal)
            literal[item["name"]] = item["value"]
        if item["name"] == "REDIS_URL":
            # No cluster DNS under podman: the Service name becomes the loopback address
            # of the host network, on the port this run gave Redis.
            item["value"] = re.sub(r"@[^/@]+$", f"@127.0.0.1:{redis_port}", item["value"])
    if any(p.get("containerPort") == 6379 for p in ctr.get("ports") or []):
        # The Redis image's entrypoint takes its port from REDIS_PORT (docs/images.md).
        ctr.setdefault("env", []).append({"name": "REDIS_PORT", "value": str(redis_port)})
    # Host network: podman refuses port mappings, so probes get numbers, not port names.
    ports = {p["name"]: p["containerPort"] for p in ctr.pop("ports", None) or [] if "name" in p}
    ports = {k: redis_port if v == 6379 else v for k, v in ports.items()}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        for kind in ("httpGet", "tcpSocket"):
            action = (ctr.get(probe) or {}).get(kind)
            if action and isinstance(action.get("port"), str):
                action["port"] = ports[action["port"]]


def shared_dirs(spec, work):
    """emptyDirs mounted by several containers become host directories with the mode and
    group a kubelet gives them (0777 plus the pod's fsGroup, setgid): podman 4.3 has no
    fsGroup and chowns an emptyDir to one container's user, so the other could not write."""
    mounts = {}
    for ctr in spec.get("containers") or []:
        for m in ctr.get("volumeMounts") or []:
            mounts.setdefault(m["name"], set()).add(ctr["name"])
    group = (spec.get("securityContext") or {}).get("fsGroup")
    for vol in spec.get("volumes") or []:
        if "emptyDir" in vol and len(mounts.get(vol["name"], ())) > 1:
            path = os.path.join(work, "volumes", vol["name"])
            os.makedirs(path)
            if group is not None:
                os.chown(path, 0, group)
            os.chmod(path, 0o2777 if group is not None else 0o777)
            vol.pop("emptyDir")
            vol["hostPath"] = {"path": path, "type": "Directory"}


def adapt(docs, redis_port, work):
    """The rendered chart as podman 4.3 runs it (see the module docstring)."""
    docs = copy.deepcopy(docs)
    docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": TOKEN_SECRET},
                 "stringData": {"token": FAKE_TOKEN, "namespace": NAMESPACE, "ca.crt": "not a CA\n"}})
    configmaps = {}
    for d in docs:
        if d["kind"] == "Secret":
            cm = secret_as_configmap(d)
            configmaps[cm["metadata"]["name"]] = cm
        elif d["kind"] == "ConfigMap":
            configmaps[d["metadata"]["name"]] = {"metadata": {"name": d["metadata"]["name"]},
                                                 "apiVersion": "v1", "kind": "ConfigMap",
                                                 "data": dict(d.get("data") or {})}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    for dep in deployments:
        spec = dep["spec"]["template"]["spec"]
        for vol in spec.get("volumes") or []:
            if "secret" in vol:
                src = vol.pop("secret")
                vol["configMap"] = {"name": src["secretName"],
                                    **{k: src[k] for k in ("items", "defaultMode", "optional") if k in src}}
        shared_dirs(spec, work)
        for ctr in spec.get("containers") or []:
            adapt_container(ctr, configmaps, redis_port)
        # Redis first: the gateway's readiness depends on it.
    deployments.sort(key=lambda d: d["metadata"]["name"] != REDIS_DEPLOYMENT)
    return list(configmaps.values()) + deployments


# ---------------------------------------------------------------- waiting and HTTP


def http(url, method="GET", headers=None, body=None, timeout=5):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=body)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
        return None, {}, str(e)


def wait_ready(base, timeout):
    """/readyz's JSON once it says ready, else its last answer after `timeout` (the run
    goes on: most checks do not need every part ready, and each reports its own result).
    Raises only when the gateway never answered."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = http(f"{base}/readyz")
        if last[0] == 200:
            return json.loads(last[2])
        time.sleep(0.5)
    if last is None or last[0] is None:
        raise RuntimeError(f"{base}/readyz never answered in {timeout} s: {last}")
    try:
        return json.loads(last[2])
    except ValueError:
        return {"ready": False, "body": last[2]}


def dump_logs():
    for ctr in (GATEWAY_CTR, EXECUTOR_CTR, REDIS_CTR):
        out = podman("logs", "--tail", "40", ctr, check_rc=False)
        print(f"--- logs of {ctr}\n{out.stdout}{out.stderr}", file=sys.stderr)


# ---------------------------------------------------------------- MCP


def client(url, mode):
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {API_KEY}"})
    return Client(streamable_http_client(url, http_client=http_client), mode=mode)


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def execute(c, key, params=None, **extra):
    args = {"key": key, **extra}
    if params is not None:
        args["params"] = params
    return text(await c.call_tool("execute", args))


async def tools_and_isolation(url, redis_port):
    async with client(url, "2026-07-28") as c:
        who = text(await c.call_tool("whoami", {}))
        check("whoami is alice (API key)", who.startswith("username: alice"), who)
        found = text(await c.call_tool("search", {"query": "echo a message back"}))
        check("search finds e2e.echo", "## e2e.echo" in found, found)

        echoed = await execute(c, "e2e.echo", {"message": "hello from podman; $(id)"})
        check("exec tool runs (executor container)", echoed.strip() == "hello from podman; $(id)", echoed)
        added = await execute(c, "e2e.add", {"a": 2, "b": 40})
        try:
            value = json.loads(added)
        except ValueError:
            value = None
        check("fn tool runs", isinstance(value, dict) and value.get("sum") == 42, added)
        check("fn tool runs as the executor's uid 65533", isinstance(value, dict) and value.get("uid") == 65533, added)

        token = await execute(c, "e2e.read_token")
        check("a tool cannot read the gateway's token", FAKE_TOKEN not in token
              and "No such file or directory" in token, token)
        env = await execute(c, "e2e.show_env")
        names = [line.split("=", 1)[0] for line in env.splitlines() if "=" in line]
        leaked = [n for n in names if (n.startswith("MCC_") and not n.startswith("MCC_CTX_"))
                  or n.startswith("REDIS") or n.startswith("E2E_GATEWAY") or n.startswith("KUBERNETES_")]
        check("a tool's full environment has the executor's variables", "E2E_EXECUTOR_MARKER=from-the-executor-container" in env, env)
        check("a tool's full environment has none of the gateway's", "PATH=" in env and not leaked
              and "gateway-setting-not-for-tools" not in env, leaked or env)
        procs = await execute(c, "e2e.processes")
        check("a tool sees no gateway process", "mcc-gateway" not in procs and "mcc-executor" in procs, procs)
        answer = await execute(c, "e2e.redis_unauthenticated", {"port": redis_port})
        check("Redis refuses a tool without the password", answer.startswith("-NOAUTH"), answer)


async def sessions_before(url):
    """Opens a legacy session and a 2026-07-28 handle, stores a value in each."""
    legacy = client(url, "legacy")
    await legacy.__aenter__()
    r = text(await legacy.call_tool("set_session", {"name": "target", "value": "10.0.0.5"}))
    check("legacy session: set_session", r == "Set 'target'.", r)
    async with client(url, "2026-07-28") as c:
        handle = text(await c.call_tool("new_session", {}))
        r = text(await c.call_tool("set_session", {"name": "budget", "value": 1000, "session": handle}))
        check("2026-07-28 session: set_session", r == "Set 'budget'.", r)
    return legacy, handle


async def sessions_after(url, legacy, handle):
    try:
        got = text(await legacy.call_tool("get_session", {"name": "target"}))
        check("legacy session (Mcp-Session-Id) survives the gateway restart", got == '"10.0.0.5"', got)
        report = await execute(legacy, "e2e.echo", {"message": "after restart"})
        check("execute after the restart", report.strip() == "after restart", report)
    except Exception as e:  # noqa: BLE001 - any failure of the old session is the finding
        check("legacy session (Mcp-Session-Id) survives the gateway restart", False, repr(e))
    finally:
        try:
            await legacy.__aexit__(None, None, None)
        except Exception:  # noqa: BLE001 - closing a session the server may have dropped
            pass
    async with client(url, "2026-07-28") as c:
        got = text(await c.call_tool("get_session", {"name": "budget", "session": handle}))
        check("2026-07-28 session handle survives the gateway restart", got == "1000", got)


# ---------------------------------------------------------------- checks outside MCP


def auth_checks(url):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    status, hdrs, text_ = http(url, "POST", headers, body)
    check("401 without a credential", status == 401, (status, text_[:200]))
    check("401 carries a Bearer challenge", "Bearer" in hdrs.get("WWW-Authenticate", hdrs.get("www-authenticate", "")), hdrs)
    bad = dict(headers, Authorization="Bearer mcc_eaf474c33c74_wrongwrongwrongwrongwrongwrongwr")
    status, _, text_ = http(url, "POST", bad, body)
    check("401 with a wrong API key", status == 401, (status, text_[:200]))


def executor_container_checks():
    def run(*cmd):
        return podman("exec", EXECUTOR_CTR, *cmd, check_rc=False)

    r = run("sh", "-c", f"test -e {TOKEN_DIR}/token || test -e {TOKEN_DIR}")
    check("executor container: no ServiceAccount token path", r.returncode == 1, r.stdout + r.stderr)
    r = run("sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    check("executor container: /proc shows no gateway process",
          r.returncode == 0 and "mcc-gateway" not in r.stdout and "mcc-executor" in r.stdout, r.stdout + r.stderr)
    r = run("env")
    names = [line.split("=", 1)[0] for line in r.stdout.splitlines()]
    leaked = [n for n in names if n.startswith("MCC_") or n.startswith("REDIS") or n.startswith("E2E_GATEWAY")]
    check("executor container: no MCC_*/REDIS* in its environment", r.returncode == 0 and not leaked, leaked or r.stderr)
    r = run("cat", "/proc/1/environ")
    check("executor container: the executor's own environ is unreadable (not dumpable)", r.returncode != 0, r.stdout[:200])
    # The same probes in the gateway container find what they look for: the checks above
    # are not vacuous.
    g = podman("exec", GATEWAY_CTR, "cat", f"{TOKEN_DIR}/token", check_rc=False)
    check("gateway container: holds the (test) token", g.stdout.strip() == FAKE_TOKEN, g.stdout + g.stderr)
    g = podman("exec", GATEWAY_CTR, "env", check_rc=False)
    check("gateway container: has MCC_* settings and REDIS_URL",
          "MCC_AUTH=api_key" in g.stdout and "REDIS_URL=redis://" in g.stdout, g.stderr)


async def persistence_probe(url):
    """Issue 32, item 5: no process of a call outlives it, `setsid` and double forks
    included, and the executor serves no caller but the gateway's uid."""
    async with client(url, "2026-07-28") as c:
        knocked = await execute(c, "e2e.escape")
    check("a tool's knock on the executor's socket is refused and closed",
          "executor answered" in knocked and knocked.strip().endswith("closed"), knocked)
    left = None
    for _ in range(30):
        r = podman("exec", EXECUTOR_CTR, "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", check_rc=False)
        left = [w for w in ("sleep 300", "sleep 301") if w in r.stdout]
        if not left:
            break
        time.sleep(0.1)
    check("no process the call left behind (setsid, double fork) outlives it", not left, left)


async def socket_tampering(url):
    """Last: a tool tries to take the executor's socket name and listen there; the bind
    must fail and the gateway's next calls must still reach the real executor."""
    async with client(url, "2026-07-28") as c:
        notes = await execute(c, "e2e.tamper_socket")
        print(f"     tamper_socket: {notes.strip()}")
        echoed = [await execute(c, "e2e.echo", {"message": f"after tampering {i}"}) for i in range(3)]
    check("after a tool's socket tampering, calls still reach the executor",
          [e.strip() for e in echoed] == [f"after tampering {i}" for i in range(3)], echoed)
    ran = notes.startswith("tamper: ")
    check("a tool cannot take the executor's socket name", "Address already in use" in notes, notes)
    r = podman("exec", EXECUTOR_CTR, "cat", "/tmp/e2e-hijacked", check_rc=False)
    check("no gateway call reached a tool's listener", ran and r.returncode != 0,
          r.stdout if ran else f"the tampering tool did not run: {notes}")


def restart_gateway(base, timeout):
    started = time.monotonic()
    podman("restart", "--time", "5", GATEWAY_CTR)
    ready = wait_ready(base, timeout)
    timings["gateway restart to ready"] = time.monotonic() - started
    check("readyz: ready again after the gateway restart", ready.get("ready") is True, ready)


# ---------------------------------------------------------------- main


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helm", default=os.environ.get("HELM", "helm"))
    parser.add_argument("--values", default=os.path.join(REPO, "e2e/pod-values.yaml"))
    parser.add_argument("--keep", action="store_true", help="leave the pods running")
    parser.add_argument("--ready-timeout", type=float, default=120)
    opts = parser.parse_args()

    t0 = time.monotonic()
    gateway_port, redis_port = free_port(), free_port()
    work = tempfile.mkdtemp(prefix="mcc-pod-e2e-")
    os.chmod(work, 0o755)
    docs = adapt(render(opts.helm, opts.values, gateway_port), redis_port, work)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    check("chart renders the gateway and Redis Deployments",
          {("Deployment", GATEWAY_DEPLOYMENT), ("Deployment", REDIS_DEPLOYMENT)} <= names, sorted(names))
    kube = os.path.join(work, "pod.yaml")
    with open(kube, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    print(f"--- podman kube play {kube} (gateway :{gateway_port}, redis :{redis_port})", flush=True)

    base = f"http://127.0.0.1:{gateway_port}"
    url = f"{base}/mcp"
    configmap_volumes = [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"]
    # Leftovers of an interrupted run would hold stale files (podman reuses the volumes).
    podman("kube", "down", kube, check_rc=False)
    podman("volume", "rm", "--force", *configmap_volumes, check_rc=False)
    try:
        podman("kube", "play", "--network", "host", kube)
        ready = wait_ready(base, opts.ready_timeout)
        timings["play to ready"] = time.monotonic() - t0
        check("readyz: ready", ready.get("ready") is True, ready)
        catalog = ready.get("catalog") or {}
        check("readyz: every tool of e2e/pod-values.yaml loaded",
              catalog.get("tools") == CATALOG_TOOLS and catalog.get("excluded_tools") == 0, catalog)
        check("readyz: sessions in Redis", (ready.get("session_store") or {}).get("backend") == "redis"
              and ready["session_store"].get("ok") is True, ready)

        auth_checks(url)
        await tools_and_isolation(url, redis_port)
        executor_container_checks()
        legacy, handle = await sessions_before(url)
        restart_gateway(base, opts.ready_timeout)
        await sessions_after(url, legacy, handle)
        await persistence_probe(url)
        await socket_tampering(url)
    except Exception as e:  # noqa: BLE001 - reported as a failure with the pods' logs
        check("run", False, repr(e))
    finally:
        if failures and not opts.keep:
            dump_logs()
        if opts.keep:
            print(f"--- kept running; stop with: podman kube down {kube}")
        else:
            podman("kube", "down", kube, check_rc=False)
            podman("volume", "rm", "--force", *configmap_volumes, check_rc=False)
            shutil.rmtree(work, ignore_errors=True)
    timings["total"] = time.monotonic() - t0
    print("--- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    if failures:
        print(f"\n{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
