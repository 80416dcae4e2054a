#!/usr/bin/env python3
"""The chart's pods under a real kubelet (e2e/cluster/node-e2e.sh, issue 31): after
`helm install --wait` of charts/mcc with node-values.yaml, checks that the operator, the
two gateways (gateway + executor containers) and Redis run Ready with their probes, that
cluster DNS and the `kubernetes` Service work from Pods, that the gateway logs JSON, and
that the official MCP Python SDK reaches the gateway through its Service (ClusterIP via
kube-proxy, from this host) with an API key and with a ServiceAccount token, and through
`kubectl port-forward`; a tool in the real Pod sees no token, no gateway environment and
no Redis without its password; a legacy MCP session survives deleting the Pod that served
it; the executor logs no refusals and the operator JSON. Then node_pods.py (the pod
runtime), node_netpol.py (the NetworkPolicies, enforced by kube-router) and
node_rollout.py (the operator's leader deleted, a rolling `helm upgrade` under load).

    node_e2e.py --kubeconfig K --helm-rc RC --helm-seconds S --node-ip IP --api-port P \
                --helm HELM [--netpol]

One line per check (`ok:` / `FAIL:`), `N passed, N failed` last; exit 1 on any failure.
"""
import argparse
import asyncio
import base64
import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import NS, AUDIENCE, REPO, Report, grant, tool  # noqa: E402
from hostpod import Kube, wait_for  # noqa: E402
import node_netpol  # noqa: E402
import node_pods  # noqa: E402
import node_rollout  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

DNS_IP = "10.96.0.10"
GATEWAY = "mcc-gateway"
HOST = f"{GATEWAY}.{NS}.svc"  # a Host the chart allows (its Service's names)


def dns_a(name, server=DNS_IP, timeout=3):
    """The A records of `name` from `server` (one UDP query, no library): a list of
    addresses, or the error as text."""
    qid = random.randrange(1 << 16)
    query = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(query, (server, 53))
        data, _ = s.recvfrom(4096)
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        s.close()
    rid, flags, qd, an = struct.unpack(">HHHH", data[:8])
    if rid != qid or flags & 0xF:
        return f"rcode {flags & 0xF}"
    pos = 12
    for _ in range(qd):  # skip the question
        while data[pos]:
            pos += data[pos] + 1
        pos += 5
    out = []
    for _ in range(an):
        if data[pos] & 0xC0 == 0xC0:
            pos += 2
        else:
            while data[pos]:
                pos += data[pos] + 1
            pos += 1
        rtype, _, _, rdlen = struct.unpack(">HHIH", data[pos:pos + 10])
        pos += 10
        if rtype == 1:
            out.append(socket.inet_ntoa(data[pos:pos + rdlen]))
        pos += rdlen
    return out


def http(url, credential=None, host=HOST, timeout=10):
    headers = {"Host": host} if host else {}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


async def mcp_calls(base, credential, calls, host=HOST):
    headers = {"Authorization": f"Bearer {credential}"}
    if host:
        headers["Host"] = host
    client = create_mcp_http_client(headers=headers)
    texts = []
    async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode="legacy") as c:
        for name, arguments in calls:
            result = await c.call_tool(name, arguments)
            texts.append(("".join(getattr(p, "text", "") for p in result.content), bool(result.is_error)))
    return texts


def mcp(base, credential, calls, host=HOST):
    try:
        return asyncio.run(mcp_calls(base, credential, calls, host))
    except Exception as e:  # noqa: BLE001 - the checks read the text
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        return [(f"{type(e).__name__}: {e}", True)] * len(calls)


async def session_across_pods(base, credential, kube):
    """A legacy MCP session (Mcp-Session-Id) through the Service: a value stored, the Pod
    that ran the call deleted, then the same session read again (the other replica holds
    it from Redis). Returns (steps, first pod, second pod); after a failure, the steps end
    with it, after every answer of status 400 or more (its method, status and text)."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}", "Host": HOST})
    steps = []
    first = second = None

    async def refused(response):
        # The SDK words any such status alike: keep what the server said.
        if response.status_code >= 400:
            await response.aread()
            steps.append(f"{response.request.method} -> {response.status_code}: {response.text[:200]}")
    client.event_hooks["response"].append(refused)

    def text(result):
        return "".join(getattr(p, "text", "") for p in result.content)
    try:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode="legacy") as c:
            steps.append(text(await c.call_tool("set_session", {"name": "target", "value": "10.0.0.5"})))
            first = text(await c.call_tool("execute", {"key": "public.node_echo", "params": {}})).split()[-1]
            # Deleting it: it leaves the Service's endpoints at once and drains for up to its
            # grace period (maxTimeoutSecs + 5); the session goes on meanwhile.
            await asyncio.to_thread(kube.run, "-n", NS, "delete", "pod", first, "--wait=false")

            def gone():
                slices = kube.items("endpointslices", NS, f"kubernetes.io/service-name={GATEWAY}")
                serving = [e.get("targetRef", {}).get("name") for s in slices for e in s.get("endpoints") or []
                           if (e.get("conditions") or {}).get("serving")
                           and not (e.get("conditions") or {}).get("terminating")]
                return first not in serving
            await asyncio.to_thread(wait_for, gone, 30, 0.3)
            steps.append(text(await c.call_tool("get_session", {"name": "target"})))
            second = text(await c.call_tool("execute", {"key": "public.node_echo", "params": {}})).split()[-1]
    except Exception as e:  # noqa: BLE001 - any failure of the session is the finding
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        steps.append(f"{type(e).__name__}: {e}")
    return steps, first, second


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--helm-rc", type=int, required=True)
    ap.add_argument("--helm-seconds", type=int, required=True)
    ap.add_argument("--node-ip", required=True)
    ap.add_argument("--api-port", required=True)
    ap.add_argument("--helm", required=True, help="helm, for the rolling upgrade")
    ap.add_argument("--netpol", action="store_true", help="NetworkPolicies are enforced (kube-router runs)")
    args = ap.parse_args()
    kube = Kube(args.kubeconfig)
    report = Report()
    check = report.check
    try:
        run(kube, args, check)
    except Exception as e:  # noqa: BLE001 - a broken step fails the run
        check("the run completed", False, f"{type(e).__name__}: {e}")
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    sys.exit(1 if report.failed else 0)


def run(kube, args, check):
    check(f"helm install --wait of charts/mcc succeeded ({args.helm_seconds} s)", args.helm_rc == 0,
          f"exit code {args.helm_rc}")

    # --- The API server from Pods: the lease reconciler publishes the node IP.
    eps = kube.items("endpointslices", "default", "kubernetes.io/service-name=kubernetes")
    addrs = sorted(f"{a}:{p['port']}" for s in eps for e in s.get("endpoints") or []
                   for a in e["addresses"] for p in s.get("ports") or [])
    check("the `kubernetes` Service has the API server's node address as its endpoint",
          addrs == [f"{args.node_ip}:{args.api_port}"], addrs)

    # --- Cluster DNS: CoreDNS behind kube-dns, reached through kube-proxy.
    dns = kube.get("deployment", "coredns", "kube-system", check=False) or {}
    check("CoreDNS (kube-system/coredns) is Available",
          (dns.get("status") or {}).get("readyReplicas") == 1, (dns.get("status") or {}))
    got = dns_a("kubernetes.default.svc.cluster.local")
    check("kube-dns (10.96.0.10) resolves kubernetes.default.svc.cluster.local to 10.96.0.1", got == ["10.96.0.1"], got)
    redis_svc = kube.get("service", "mcc-redis", NS, check=False) or {}
    got = dns_a(f"mcc-redis.{NS}.svc.cluster.local")
    check("kube-dns resolves the chart's Redis Service name to its ClusterIP",
          got == [(redis_svc.get("spec") or {}).get("clusterIP")], got)

    # --- The chart's workloads.
    def ready(name, want):
        d = kube.get("deployment", name, NS, check=False) or {}
        st = d.get("status") or {}
        return st.get("readyReplicas") == want and st.get("updatedReplicas") == want, st
    for name, want in (("mcc-operator", 2), ("mcc-gateway", 2), ("mcc-redis", 1)):
        ok, st = ready(name, want)
        check(f"Deployment {name}: {want}/{want} Ready", ok, {k: st.get(k) for k in ("replicas", "readyReplicas")})

    pods = kube.items("pods", NS, "app.kubernetes.io/component=gateway")
    detail = []
    good = len(pods) == 2
    for p in pods:
        names = sorted(c["name"] for c in p["spec"]["containers"])
        sts = p["status"].get("containerStatuses") or []
        restarts = sum(s.get("restartCount", 0) for s in sts)
        detail.append((p["metadata"]["name"], p["spec"].get("nodeName"), names,
                       [s["ready"] for s in sts], restarts))
        good = good and names == ["executor", "gateway"] and all(s["ready"] for s in sts) and restarts == 0 \
            and p["spec"].get("nodeName") == "mcc-node"
    check("two gateway Pods on mcc-node, each with gateway and executor containers Ready, no restarts",
          good, detail)
    gw = next((c for c in (pods[0]["spec"]["containers"] if pods else []) if c["name"] == "gateway"), {})
    check("the gateway container's startup, readiness and liveness probes are set (and passed: Ready)",
          good and all(k in gw for k in ("startupProbe", "readinessProbe", "livenessProbe")), sorted(gw))
    # A readiness probe refused while the process starts is how readiness works (the
    # operator's has no startupProbe), and so is a mount retried because the kubelet's
    # own Secret watch had not synced yet (a loaded machine; a missing Secret reads
    # `secret "…" not found` instead). So is the API server's own ClusterIP repair loop
    # noticing a Service created while it took its snapshot (`ClusterIPNotAllocated …
    # repairing`, a known race of kube-apiserver's allocator; it repairs, and the Services
    # are used below). Anything else (liveness, back-off, mounts) is not.
    events = kube.items("events", NS)
    warnings = [f"{e['involvedObject']['name']}: {e['reason']}: {e.get('message', '')[:140]}" for e in events
                if e.get("type") == "Warning"]
    startup = (": Unhealthy: Readiness probe failed:", ": failed to sync secret cache",
               ": ClusterIPNotAllocated: ")
    bad = [w for w in warnings if not any(s in w for s in startup)]
    check(f"no Warning events in mcc-system but readiness, Secret sync and IP repair at start ({len(warnings) - len(bad)} "
          "of those)", not bad, bad[:5])

    # --- Logs through the kubelet: JSON lines.
    if pods:
        logs = kube.run("-n", NS, "logs", pods[0]["metadata"]["name"], "-c", "gateway", check=False).stdout
        lines = [line for line in logs.splitlines() if line.strip()]
        non_json = []
        for line in lines:
            try:
                json.loads(line)
            except ValueError:
                non_json.append(line[:120])
        check(f"kubectl logs of a gateway container: JSON lines only ({len(lines)} lines)",
              lines and not non_json, non_json[:3])
        # The executor's exec probes run `mcc-executor probe` as the executor's own uid
        # (65533), which it refuses by design ("a refusal is an answer"); every refusal is
        # also the warning a tool connecting to the socket would raise.
        logs = kube.run("-n", NS, "logs", pods[0]["metadata"]["name"], "-c", "executor", check=False).stdout
        refused = [line for line in logs.splitlines() if "refused a connection" in line]
        check("the executor logs no refused connections (none but the gateway connects)", not refused,
              f"{len(refused)} warnings, e.g. {refused[:1]}")
    ops = kube.items("pods", NS, "app.kubernetes.io/component=operator")
    if ops:
        logs = kube.run("-n", NS, "logs", ops[0]["metadata"]["name"], check=False).stdout
        lines = [line for line in logs.splitlines() if line.strip()]
        non_json = []
        for line in lines:
            try:
                json.loads(line)
            except ValueError:
                non_json.append(line[:120])
        check(f"kubectl logs of an operator: JSON lines only ({len(lines)} lines)", lines and not non_json,
              f"{len(non_json)} lines are not JSON, e.g. {non_json[:1]}")

    # --- The operator in a Pod reaches the API server (kubernetes Service, kube-proxy).
    cm, _ = wait_for(lambda: kube.get("configmap", "mcc-catalog", NS, check=False), 60, 1)
    check("the operator (in a Pod, through the `kubernetes` Service) published the catalog ConfigMap", bool(cm))

    # --- Through the gateway's Service, from this host: ClusterIP via kube-proxy.
    svc = kube.get("service", GATEWAY, NS)
    port = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "http")
    base = f"http://{svc['spec']['clusterIP']}:{port}"
    status, body = http(f"{base}/readyz")
    check(f"GET /readyz through the Service ({base}, Host {HOST}) answers 200", status == 200, (status, body[:200]))

    kube.apply([grant("alice", NS, {"username": "alice", "groups": ["public"], "apiKey": {"enabled": True}}),
                tool("node-echo", NS, {"name": "node_echo", "groups": ["public"],
                                       "exec": "echo hello from $(hostname)"})])

    def api_key():
        s = kube.get("secret", "alice-api-key", NS, check=False)
        return base64.b64decode(s["data"]["apiKey"]).decode() if s else None
    key, _ = wait_for(api_key, 60, 0.5)
    check("the operator wrote alice's API-key Secret", bool(key))
    # Both replicas behind the Service know the key and the Tool (the Service picks one).
    served, took = wait_for(lambda: all(http(f"{base}/v1/tools/public.node_echo", key)[0] == 200
                                        for _ in range(6)), 90, 0.5)
    check("the Tool is served through the Service (6 requests in a row, both replicas)", bool(served), took)
    status, body = http(f"{base}/v1/whoami", key)
    check("GET /v1/whoami with the API key through the Service answers alice",
          status == 200 and json.loads(body).get("username") == "alice", (status, body[:200]))

    t0 = time.monotonic()
    texts = mcp(base, key, [("execute", {"key": "public.node_echo", "params": {}}),
                            ("execute", {"key": "public.node_echo", "params": {}})])
    text, err = texts[0]
    check("MCP SDK through the Service with an API key: execute runs the Tool in a gateway Pod's "
          "executor", not err and "hello from mcc-gateway-" in text, text[:300])
    print(f"  time: MCP session, two executes = {time.monotonic() - t0:.2f} s", flush=True)

    # Isolation inside the real Pod, from a tool (the executor container, its own uid):
    # no ServiceAccount token, none of the gateway's environment, Redis needs its password
    # (reached by its Service name: the Pod's cluster DNS).
    probe = ("tok=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null | wc -c); "
             "seen=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e REDIS -e MCC_METRICS -e MCC_AUTH); "
             "mine=$(env | grep -c -e REDIS -e MCC_METRICS -e MCC_AUTH); "
             "redis=$(python3 -c \"import socket; s = socket.create_connection(('mcc-redis', 6379), 3); "
             "s.sendall(b'PING\\r\\n'); print(s.recv(64).decode().split()[0])\" 2>&1 | tail -1); "
             "echo token=$tok environ=$seen env=$mine redis=$redis")
    kube.apply([tool("node-isolation", NS, {"name": "node_isolation", "groups": ["public"], "exec": probe})])
    wait_for(lambda: http(f"{base}/v1/tools/public.node_isolation", key)[0] == 200, 30, 0.5)
    text, err = mcp(base, key, [("execute", {"key": "public.node_isolation", "params": {}})])[0]
    check("from a tool in the real Pod: no ServiceAccount token, no gateway environment, Redis "
          "refuses it without the password (NOAUTH)",
          not err and "token=0 environ=0 env=0 redis=-NOAUTH" in text, text[:300])

    # ServiceAccount token (TokenReview by the gateway Pod, through the `kubernetes` Service).
    # The gateway checks it against the API server's JWKS, then a TokenReview: both from
    # the Pod through the `kubernetes` Service.
    kube.run("-n", NS, "create", "serviceaccount", "node-e2e-caller", check=False)
    kube.apply([grant("node-agent", NS, {"username": "node-agent", "groups": ["public"],
                                         "serviceAccounts": [{"namespace": NS, "name": "node-e2e-caller"}]})])
    token = kube.token(NS, "node-e2e-caller", audience=AUDIENCE)
    bound, _ = wait_for(lambda: http(f"{base}/v1/whoami", token)[0] == 200, 30, 0.5)
    texts = mcp(base, token, [("whoami", {}), ("execute", {"key": "public.node_echo", "params": {}})])
    check("MCP SDK through the Service with a ServiceAccount token: whoami is node-agent, execute runs",
          not texts[0][1] and "node-agent" in texts[0][0] and not texts[1][1] and "hello" in texts[1][0],
          [t[:200] for t, _ in texts])

    # kubectl port-forward: API server -> kubelet (TLS both ways) -> the Pod.
    local = 17000 + os.getpid() % 1000
    pf = subprocess.Popen(["kubectl", "--kubeconfig", args.kubeconfig, "-n", NS, "port-forward",
                           f"svc/{GATEWAY}", f"{local}:{port}"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    try:
        got, _ = wait_for(lambda: http(f"http://127.0.0.1:{local}/healthz", host=None)[0] == 200, 20, 0.3)
        texts = mcp(f"http://127.0.0.1:{local}", key, [("execute", {"key": "public.node_echo", "params": {}})],
                    host=None) if got else [("port-forward did not answer", True)]
        text, err = texts[0]
        check("kubectl port-forward svc/mcc-gateway: MCP SDK execute with the API key", not err and "hello" in text,
              text[:300])
    finally:
        pf.terminate()
        pf.wait(5)

    steps, first, second = asyncio.run(session_across_pods(base, key, kube))
    check("a legacy MCP session survives deleting the gateway Pod that served it (the other replica "
          "continues it from Redis)", steps[-1:] == ['"10.0.0.5"'] and first and second and first != second,
          (steps, first, second))

    # --- The pod runtime under the kubelet (node_pods.py).
    node_pods.run(kube, check, base, key, HOST, port)

    # --- The chart's NetworkPolicies, enforced (node_netpol.py).
    node_netpol.run(kube, check, base, key, HOST, port, "localhost/mcc-executor:dev", args.netpol)

    # --- Replacing pods under load (node_rollout.py).
    node_rollout.operator_deletion(kube, check, base, key, HOST, http)
    upgrade = ["--kubeconfig", args.kubeconfig, "upgrade", "mcc", os.path.join(REPO, "charts/mcc"), "-n", NS,
               "-f", os.path.join(REPO, "e2e/cluster/node-values.yaml"),
               "--set", f"networkPolicy.apiServer.ports={{{args.api_port}}}"]
    node_rollout.rolling_upgrade(kube, check, args.helm, upgrade, base, key, HOST)


if __name__ == "__main__":
    main()
