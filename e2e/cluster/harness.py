"""The cluster e2e's harness: the names it installs under, the report (one line per
check), HTTP and MCP calls against the gateways, and `Cluster`, which starts the chart's
operator and gateway as host processes (hostpod.py) and reads the cluster's state."""
import asyncio
import base64
import gzip
import json
import os
import urllib.error
import urllib.request

from hostpod import HostPod, Kube, wait_for
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

NS = "mcc-system"
PODS_NS = "mcc-e2e-pods"
TENANT_NS = "mcc-e2e-tenant"
BULK_NS = [f"mcc-e2e-bulk-{i}" for i in range(3)]
RELEASE = "mcc"
CATALOG = "mcc-catalog"
AUDIENCE = "mcc-gateway"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Report:
    def __init__(self):
        self.passed = self.failed = 0
        self.timings = {}

    def check(self, what, ok, detail=""):
        print(f"{'ok' if ok else 'FAIL'}: {what}{'' if ok or not detail else f' -- {detail}'}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def timing(self, name, seconds):
        self.timings[name] = round(seconds, 3)
        print(f"  time: {name} = {seconds:.2f} s", flush=True)


# --- HTTP against the gateways ---------------------------------------------------------

def http(url, credential=None, method="GET", body=None, timeout=10):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


async def mcp_call(base, credential, tool, arguments, mode, statuses):
    """One MCP tools/call through the official SDK; the text of its result. The HTTP
    statuses the gateway answered go to `statuses` (the SDK's errors do not carry them)."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"})

    async def record(response):
        statuses.append(response.status_code)
    client.event_hooks["response"].append(record)
    async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode=mode) as c:
        result = await c.call_tool(tool, arguments)
        return "".join(getattr(part, "text", "") for part in result.content), bool(result.is_error)


def mcp(base, credential, tool, arguments, mode="legacy"):
    statuses = []
    try:
        return asyncio.run(mcp_call(base, credential, tool, arguments, mode, statuses))
    except Exception as e:  # the SDK raises on HTTP errors; the checks read the text
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        return f"{type(e).__name__}: {e} (HTTP {statuses})", True


async def mcp_session_calls(base, credential, calls, mode):
    """Several tools/call in one MCP session, in order; the text of each result."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"})
    texts = []
    async with Client(streamable_http_client(f"{base}/mcp", http_client=client), mode=mode) as c:
        for tool, arguments in calls:
            result = await c.call_tool(tool, arguments)
            texts.append("".join(getattr(part, "text", "") for part in result.content))
    return texts


def mcp_session(base, credential, calls, mode="legacy"):
    """`mcp_session_calls`, or the error's text in place of every result."""
    try:
        return asyncio.run(mcp_session_calls(base, credential, calls, mode))
    except Exception as e:  # noqa: BLE001 - the checks read the text
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        return [f"{type(e).__name__}: {e}"] * len(calls)


# --- The run ---------------------------------------------------------------------------

class Cluster:
    def __init__(self, args, report):
        self.kube = Kube(args.kubeconfig)
        self.args = args
        self.report = report
        self.check = report.check
        self.operators = []
        self.gateways = []  # (gateway HostPod, executor HostPod, base URL)
        self.pid_dir = os.path.join(os.path.dirname(args.kubeconfig), "pids")

    # Processes ----------------------------------------------------------------------

    def start_operator(self, n):
        op = HostPod(self.kube, NS, f"{RELEASE}-operator", "operator", f"{self.args.bin}/mcc-operator",
                     f"operator-{n}", self.args.workdir, pid_dir=self.pid_dir,
                     overrides={"MCC_METRICS_ADDR": f"127.0.0.1:{self.args.port_base + 50 + n}",
                                "RUST_LOG": "info,kube=warn",
                                "MCC_UPSTREAM_TOKEN_DIR": self.upstream_token_dir(f"operator-{n}")})
        self.operators.append(op.start())
        return op

    def start_gateway(self, n):
        port = self.args.port_base + n
        socket = f"@mcc-e2e-executor-{os.getpid()}-{n}"
        executor = HostPod(self.kube, NS, f"{RELEASE}-gateway", "executor", f"{self.args.bin}/mcc-executor",
                           f"executor-{n}", self.args.workdir, pid_dir=self.pid_dir, service_account=False)
        # Gateway and executor run as one user here: the executor serves it.
        executor.argv = [executor.argv[0], "serve", "--socket", socket, "--allow-uid", str(os.getuid())]
        executor.start()
        gateway = HostPod(self.kube, NS, f"{RELEASE}-gateway", "gateway", f"{self.args.bin}/mcc-gateway",
                          f"gateway-{n}", self.args.workdir, pid_dir=self.pid_dir, overrides={
                              "MCC_SERVER__HOST": "127.0.0.1", "MCC_SERVER__PORT": str(port),
                              "MCC_METRICS__PORT": str(port + 100),
                              "MCC_SERVER__ALLOWED_HOSTS": "127.0.0.1;localhost",
                              "MCC_EXECUTION__EXECUTOR_SOCKET": socket,
                              "REDIS_URL": self.args.redis_url, "TMPDIR": self.args.workdir,
                              "MCC_UPSTREAM_TOKEN_DIR": self.upstream_token_dir(f"gateway-{n}")})
        gateway.start()
        base = f"http://127.0.0.1:{port}"
        self.gateways.append((gateway, executor, base))
        return gateway, base

    def upstream_token_dir(self, name):
        """Where a host process finds its projected upstream tokens (the kubelet's
        projection, written by upstreams.py with TokenRequests)."""
        return os.path.join(self.args.workdir, "upstream-tokens", name)

    def stop_all(self):
        for gw, ex, _ in self.gateways:
            gw.stop()
            ex.stop()
        for op in self.operators:
            op.stop()

    def bases(self):
        return [base for _, _, base in self.gateways]

    # Helpers -----------------------------------------------------------------------

    def condition(self, kind, name, namespace):
        obj = self.kube.get(kind, name, namespace, check=False)
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == "Ready":
                return c
        return None

    def wait_ready(self, kind, name, namespace, timeout=30, status="True"):
        def reached():
            cond = self.condition(kind, name, namespace)
            return cond if cond and cond.get("status") == status else None
        cond, _ = wait_for(reached, timeout, 0.3)
        return cond

    def catalog_text(self):
        """The published catalog document (joined from shards when sharded) as text."""
        cm = self.kube.get("configmap", CATALOG, NS, check=False)
        if not cm:
            return ""
        data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
        if "catalog.json" in data:
            return data["catalog.json"]
        if "catalog.json.gz" in binary:
            return gzip.decompress(base64.b64decode(binary["catalog.json.gz"])).decode()
        if "shards.json" in data:
            index = json.loads(data["shards.json"])
            parts = b""
            for shard in index["shards"]:
                part = self.kube.get("configmap", shard["name"], NS, check=False)
                if not part:
                    return ""
                parts += base64.b64decode(part["binaryData"]["part"])
            return gzip.decompress(parts).decode()
        return ""

    def api_key(self, grant):
        s = self.kube.get("secret", f"{grant}-api-key", NS, check=False)
        return base64.b64decode(s["data"]["apiKey"]).decode() if s else None

    def on_every_gateway(self, predicate, timeout):
        """Seconds until predicate(base) holds on every gateway at once, or None."""
        ok, took = wait_for(lambda: all(predicate(b) for b in self.bases()), timeout, 0.1)
        return took if ok else None

    def whoami(self, base, credential):
        status, body = http(f"{base}/v1/whoami", credential)
        return json.loads(body).get("username") if status == 200 else status


def tool(name, namespace, spec):
    return {"apiVersion": "mcc.dev/v1alpha1", "kind": "Tool",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def grant(name, namespace, spec):
    return {"apiVersion": "mcc.dev/v1alpha1", "kind": "UserGrant",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


