"""Replacing the chart's pods under load (node_e2e.py, issue 31): a rolling `helm upgrade`
of the gateway while clients call `execute` in a loop through the Service (an MCP SDK
legacy session, kept alive across replicas by Redis, and REST calls on new connections
each) loses no call; deleting the leading operator's Pod leaves the catalog served and
its successor publishes a Tool created after the deletion."""
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


class Loop:
    """Calls `execute` of `key` until stopped, in its own thread; counts answers and
    failures (with the first few failures' text)."""

    def __init__(self, name, call):
        self.name, self.call = name, call
        self.ok = 0
        self.failures = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def record(self, good, what):
        if good:
            self.ok += 1
        else:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {what}"[:300])

    def run(self):
        self.call(self)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(60)
        return self


def mcp_loop(base, credential, host, key):
    async def session(loop):
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}", "Host": host})
        async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode="legacy") as c:
            while not loop.stopping.is_set():
                try:
                    r = await c.call_tool("execute", {"key": key, "params": {}})
                    text = "".join(getattr(p, "text", "") for p in r.content)
                    loop.record(not r.is_error and "hello" in text, text)
                except Exception as e:  # noqa: BLE001 - a failed call is what is counted
                    loop.record(False, f"{type(e).__name__}: {e}")
                await asyncio.sleep(0.05)

    def call(loop):
        try:
            asyncio.run(session(loop))
        except Exception as e:  # noqa: BLE001 - the session itself broke
            while isinstance(e, BaseExceptionGroup) and e.exceptions:
                e = e.exceptions[0]
            loop.record(False, f"session ended: {type(e).__name__}: {e}")
    return call


def rest_loop(base, credential, host, key):
    def call(loop):
        while not loop.stopping.is_set():
            req = urllib.request.Request(f"{base}/v1/tools/{key}", method="POST", data=b"{}",
                                         headers={"Authorization": f"Bearer {credential}", "Host": host,
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    body = json.loads(r.read().decode())
                    loop.record(body.get("outcome") == "success", body)
            except urllib.error.HTTPError as e:
                loop.record(False, f"HTTP {e.code}: {e.read().decode()[:200]}")
            except OSError as e:
                loop.record(False, f"{type(e).__name__}: {e}")
            time.sleep(0.05)
    return call


def gateway_pods(kube):
    return sorted(p["metadata"]["name"] for p in kube.items("pods", NS, "app.kubernetes.io/component=gateway"))


def rolling_upgrade(kube, check, helm, helm_args, base, key, host):
    before = gateway_pods(kube)
    loops = [Loop("MCP session", mcp_loop(base, key, host, "public.node_echo")).start(),
             Loop("REST", rest_loop(base, key, host, "public.node_echo")).start()]
    time.sleep(2)
    t0 = time.monotonic()
    proc = subprocess.run([helm, *helm_args, "--set-string", f"gateway.podAnnotations.mcc-e2e/rollout={int(time.time())}",
                           "--wait", "--timeout", "300s"], capture_output=True, text=True)
    took = time.monotonic() - t0
    # Old Pods drain for a while after helm is satisfied: keep calling until they are gone.
    wait_for(lambda: len(gateway_pods(kube)) == 2, 120, 0.5)
    time.sleep(3)
    for loop in loops:
        loop.stop()
    after = gateway_pods(kube)
    check(f"helm upgrade rolled both gateway Pods ({took:.0f} s)",
          proc.returncode == 0 and not set(before) & set(after) and len(after) == 2,
          (proc.stderr.strip()[-300:], before, after))
    for loop in loops:
        check(f"a client calling execute in a loop during the rollout ({loop.name}) lost no call: "
              f"{loop.ok} answered, {len(loop.failures)} failed", loop.ok > 20 and not loop.failures,
              loop.failures[:3])


def operator_deletion(kube, check, base, key, host, http):
    lease = kube.get("lease", "mcc-operator", NS, check=False) or {}
    leader = (lease.get("spec") or {}).get("holderIdentity")
    ops = [p["metadata"]["name"] for p in kube.items("pods", NS, "app.kubernetes.io/component=operator")]
    check("an operator Pod holds the Lease", leader in ops, (leader, ops))
    if leader not in ops:
        return
    served = {"ok": 0, "failed": []}
    stopping = threading.Event()

    def keep_reading():
        while not stopping.is_set():
            status, _ = http(f"{base}/v1/tools/public.node_echo", key)
            if status == 200:
                served["ok"] += 1
            else:
                served["failed"].append(status)
            time.sleep(0.2)
    reader = threading.Thread(target=keep_reading, daemon=True)
    reader.start()
    t0 = time.monotonic()
    kube.run("-n", NS, "delete", "pod", leader, "--wait=true", timeout=120)
    stopped = time.monotonic() - t0
    # The operator is its container's PID 1: without a SIGTERM handler it would ignore
    # the signal and linger for its whole grace period (30 s), holding the Lease.
    check(f"the deleted operator Pod stops on SIGTERM ({stopped:.1f} s, grace period 30 s)", stopped < 10)
    kube.apply([tool("node-after", NS, {"name": "node_after", "groups": ["public"], "exec": "echo after"})])
    got, _ = wait_for(lambda: all(http(f"{base}/v1/tools/public.node_after", key)[0] == 200 for _ in range(4)),
                      90, 0.5)
    took = time.monotonic() - t0
    time.sleep(max(0.0, 3 - took))  # reads over 3 s at least, however fast the handover
    stopping.set()
    reader.join(5)
    check(f"operator leader {leader} deleted: the catalog stays served meanwhile "
          f"({served['ok']} reads, {len(served['failed'])} failed)", served["ok"] > 5 and not served["failed"],
          served["failed"][:5])
    lease = kube.get("lease", "mcc-operator", NS, check=False) or {}
    holder = (lease.get("spec") or {}).get("holderIdentity")
    # The stopping leader hands its Lease back: the follower takes it at its next try
    # (every 5 s), not a lease duration (15 s) after the last renewal.
    check(f"... and a Tool created after the deletion is served by both gateways ({took:.1f} s after the "
          f"deletion, at most 20; the Lease is {holder})", bool(got) and took < 20 and holder and holder != leader,
          holder)
    ready, _ = wait_for(lambda: ((kube.get("deployment", "mcc-operator", NS) or {}).get("status") or {})
                        .get("readyReplicas") == 2, 90, 1)
    check("... and the operator Deployment is back at 2/2 Ready", bool(ready))
