"""The chart's NetworkPolicies, enforced (node_e2e.py, issue 31): kube-router's network
policy controller (node-up.sh, MCC_NODE_NETPOL) turns them into iptables rules on the
node. Targets that answer without a policy in the way: a peer Pod in a namespace of its
own (no policy there, no label), and a listener on the node at a link-local address
(169.254.77.1, which node-up.sh adds to the node's bridge: the range the chart excepts
for cloud metadata). The peer reaching the link-local listener shows it answers; then
  - a local tool in the gateway Pod (the executor) and a pod Tool's Pod reach the peer
    (egress to any address) but not the link-local listener (the `except`s);
  - the peer cannot reach the gateway's port until its namespace carries
    `mcc.dev/gateway-access: "true"`, nor Redis at all."""
import sys

from harness import NS, tool
from hostpod import wait_for
import node_pods

PEER_NS = "mcc-node-peer"
LINK_LOCAL = "169.254.77.1"
LINK_LOCAL_PORT = 8099
# One connection attempt: prints `open <status>` or `blocked <error>`; 3 s at most.
PROBE = ("import sys, urllib.request\n"
         "try:\n"
         "    r = urllib.request.urlopen(sys.argv[1], timeout=3)\n"
         "    print('open', r.status)\n"
         "except Exception as e:\n"
         "    print('blocked', type(e).__name__)\n")


def peer_objects(image):
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PEER_NS}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "peer", "namespace": PEER_NS,
                                                           "labels": {"app": "peer"}},
         "spec": {"containers": [{"name": "peer", "image": image, "imagePullPolicy": "IfNotPresent",
                                  "command": ["python3", "-m", "http.server", "8080", "-d", "/tmp"]}],
                  "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0}},
    ]


def probe_tools():
    cmd = "python3 -c {{ probe | quote }} {{ url | quote }}"
    params = [{"name": "probe", "type": "str", "required": True}, {"name": "url", "type": "str", "required": True}]
    small = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
    return [tool("node-probe-local", NS, {"name": "node_probe_local", "groups": ["public"], "exec": cmd,
                                          "params": params}),
            tool("node-probe-pod", node_pods.PODS, {"name": "node_probe_pod", "groups": ["public"], "exec": cmd,
                                                     "params": params, "runtime": {"pod": {"resources": small}}})]


def from_peer(kube, url):
    proc = kube.run("-n", PEER_NS, "exec", "peer", "--", "python3", "-c", PROBE, url, check=False, timeout=30)
    return (proc.stdout.strip() or proc.stderr.strip())[:200]


def from_tool(base, key, host, tool_key, url):
    status, body = node_pods.post(base, tool_key, key, {"probe": PROBE, "url": url}, host)
    if status == 200 and isinstance(body, dict):
        return str(body.get("result", body)).strip()
    return f"{status} {body}"[:300]


def run(kube, check, base, key, host, port, image, enforced):
    if not enforced:
        check("NetworkPolicies are enforced on the node (kube-router's controller runs)", False,
              "node-up.sh ran with MCC_NODE_NETPOL=0: the chart's rules stay unproven")
        return
    kube.apply(peer_objects(image))
    ready, _ = wait_for(lambda: ((kube.get("pod", "peer", PEER_NS, check=False) or {}).get("status") or {})
                        .get("podIP") and from_peer(kube, "http://127.0.0.1:8080/").startswith("open"), 60, 1)
    peer_ip = (kube.get("pod", "peer", PEER_NS).get("status") or {}).get("podIP")
    peer = f"http://{peer_ip}:8080/"
    link_local = f"http://{LINK_LOCAL}:{LINK_LOCAL_PORT}/"
    seen = from_peer(kube, link_local)
    check(f"without a policy (the peer's namespace) the link-local listener {LINK_LOCAL} answers: {seen}",
          bool(ready) and seen.startswith("open"), seen)

    kube.apply(probe_tools())
    wait_for(lambda: all(node_pods.served(base, f"public.{n}", key, host)
                         for n in ("node_probe_local", "node_probe_pod")), 60, 0.5)
    for where, tool_key in (("a local tool in the gateway Pod", "public.node_probe_local"),
                            ("a pod Tool's Pod", "public.node_probe_pod")):
        to_peer = from_tool(base, key, host, tool_key, peer)
        to_meta = from_tool(base, key, host, tool_key, link_local)
        check(f"{where} reaches a Pod in another namespace ({to_peer}) but not the link-local address "
              f"({to_meta})", to_peer.startswith("open") and to_meta.startswith("blocked"), (to_peer, to_meta))

    gateway = f"http://{GATEWAY_SVC}:{port}/healthz"
    seen = from_peer(kube, gateway)
    check(f"the peer's namespace (unlabelled) cannot reach the gateway's port: {seen}", seen.startswith("blocked"),
          seen)
    kube.run("label", "namespace", PEER_NS, "mcc.dev/gateway-access=true")
    opened, took = wait_for(lambda: from_peer(kube, gateway).startswith("open"), 30, 1)
    check(f"... and can once labelled mcc.dev/gateway-access=true ({took:.0f} s)", bool(opened))
    redis = kube.get("service", "mcc-redis", NS)["spec"]["clusterIP"]
    proc = kube.run("-n", PEER_NS, "exec", "peer", "--", "python3", "-c",
                    "import socket\ntry:\n    s = socket.create_connection(('" + redis + "', 6379), 3)\n"
                    "    s.sendall(b'PING\\r\\n'); print('open', s.recv(64))\nexcept Exception as e:\n"
                    "    print('blocked', type(e).__name__)", check=False, timeout=30)
    check(f"... and never Redis: {proc.stdout.strip()[:100]}", proc.stdout.startswith("blocked"),
          proc.stdout + proc.stderr)
    kube.run("delete", "namespace", PEER_NS, "--wait=false", check=False)


GATEWAY_SVC = f"mcc-gateway.{NS}.svc.cluster.local"

if __name__ == "__main__":
    sys.exit("run by node_e2e.py")
