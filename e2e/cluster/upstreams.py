"""Issue 33 in Kubernetes mode: an MCPServer over the reference server-everything (npm,
streamable HTTP, run as a host process like the operator and the gateways). The chart's
operator discovers it through the chart's RBAC (its header from a Secret it may `get`
by name), publishes its tools, and both gateways search and execute them at the URL the
catalog records; a host off the egress allow-list is refused on status; the upstream
going away marks its tools unavailable and coming back restores them. Then a small
legacy-generation upstream on the official Python SDK whose tool list changes
(changing_upstream.py): the operator's standing stream hears
`notifications/tools/list_changed` and publishes the new tool long before its schedule.

Then the same small upstream over https with a certificate from a CA made here
(openssl): trusted only through the MCPServer's `ca` (a ConfigMap key), read by the
operator for discovery and by both gateways for calls.

Last, `sessionContext`: published with the catalog, so both gateways send the small
upstream the caller's identity and the one declared session variable as `_meta`, and
nothing to an MCPServer that declares none.

The chart values (e2e/cluster/values.yaml) allow MCPServers in UPSTREAM_NS, at host
127.0.0.1 only, with header Secrets named `ev-token` and CA ConfigMaps named
`upstream-ca`, and let them send the caller's identity (`upstreams.identityNamespaces`)."""
import base64
import hashlib
import json
import os
import subprocess
import sys
import urllib.request

from harness import NS, RELEASE, http, mcp, mcp_session
from hostpod import wait_for

UPSTREAM_NS = "mcc-e2e-upstream"
EVERYTHING = os.path.expanduser(
    "~/.cache/mcc-upstream/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
TOKEN = "Bearer e2e-upstream-token-not-for-the-catalog"
AUDIENCE = "mcc-e2e-upstream-audience"  # upstreams.tokenAudiences in values.yaml
CHANGING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "changing_upstream.py")


def mcpserver(name, spec):
    return {"apiVersion": "mcc.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": name, "namespace": UPSTREAM_NS}, "spec": spec}


class Everything:
    """server-everything on `port`, its output in the work directory."""

    def __init__(self, port, workdir):
        self.port, self.workdir, self.proc = port, workdir, None

    def start(self):
        log = open(os.path.join(self.workdir, "everything.log"), "ab")
        self.proc = subprocess.Popen(["node", EVERYTHING, "streamableHttp"], stdout=log, stderr=log,
                                     env=dict(os.environ, PORT=str(self.port)))
        up, _ = wait_for(lambda: http(f"http://127.0.0.1:{self.port}/mcp")[0] not in (0,), 30, 0.2)
        return bool(up)

    def stop(self):
        if self.proc:
            stop_process(self.proc)


def stop_process(proc):
    """SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def status(c, name):
    obj = c.kube.get("mcpservers.mcc.dev", name, UPSTREAM_NS, check=False)
    return (obj or {}).get("status") or {}


def execute(c, base, key, params):
    return mcp(base, c.alice_key, "execute", {"key": key, "params": params}, mode="legacy")


def run(c):
    if not os.path.exists(EVERYTHING):
        # gateway/tests/it/upstream_support installs it (npm); cargo test runs first.
        c.check("server-everything is installed (cargo test's upstream tests install it)", False, EVERYTHING)
        return
    port = c.args.port_base + 90
    everything = Everything(port, c.args.workdir)
    try:
        steps(c, everything, port)
    finally:
        everything.stop()
    list_changed(c, c.args.port_base + 91)
    custom_ca(c, c.args.port_base + 92)
    session_context(c, c.args.port_base + 93)


def operator_metric(c, name):
    """The sum of an operator metric over the running operators (only the leader acts)."""
    total = 0.0
    for n in (1, 2):
        _, text = http(f"http://127.0.0.1:{c.args.port_base + 50 + n}/metrics", None)
        for line in (text or "").splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
    return total


def list_changed(c, port):
    log = open(os.path.join(c.args.workdir, "changing-upstream.log"), "ab")
    proc = subprocess.Popen([sys.executable, CHANGING, str(port)], stdout=log, stderr=log)
    try:
        up, _ = wait_for(lambda: http(f"http://127.0.0.1:{port}/mcp")[0] not in (0,), 30, 0.2)
        c.check("a legacy upstream on the official Python SDK runs (tools change on request)", bool(up))
        # A schedule of an hour: only list_changed can bring the new tool in time.
        c.kube.apply([mcpserver("changing", {
            "url": f"http://127.0.0.1:{port}/mcp", "groups": ["public"], "prefix": "ch_",
            "refreshSeconds": 3600})])
        cond = c.wait_ready("mcpservers.mcc.dev", "changing", UPSTREAM_NS, timeout=60)
        listening, _ = wait_for(lambda: status(c, "changing").get("listChanged") == "Listening", 30, 0.3)
        st = status(c, "changing")
        c.check("its MCPServer is Ready with 1 tool and a standing stream (listChanged: Listening)",
                bool(cond) and bool(listening) and st.get("tools") == 1
                and st.get("lastRefreshReason") == "Initial", json.dumps(st)[:400])
        before = operator_metric(c, "mcc_operator_mcpserver_list_changed_notifications_total")
        req = urllib.request.Request(f"http://127.0.0.1:{port}/change?add=second", method="POST")
        told = json.loads(urllib.request.urlopen(req, timeout=10).read()).get("told", 0)
        c.check("the upstream adds a tool and tells its sessions (notifications/tools/list_changed)", told >= 1,
                f"told {told}")
        refreshed, took = wait_for(
            lambda: (lambda s: s.get("tools") == 2 and s.get("lastRefreshReason") == "ListChanged")(
                status(c, "changing")), 30, 0.3)
        c.check("the operator refreshes at once on list_changed (lastRefreshReason: ListChanged, 2 tools)",
                bool(refreshed), f"{took:.1f} s; {json.dumps(status(c, 'changing'))[:300]}")
        after = operator_metric(c, "mcc_operator_mcpserver_list_changed_notifications_total")
        c.check("... counted in mcc_operator_mcpserver_list_changed_notifications_total",
                after >= before + 1, f"{before} -> {after}")
        took = c.on_every_gateway(
            lambda b: (lambda r: not r[1] and "second ran" in r[0])(
                execute(c, b, "public.ch_second", {})), 30)
        c.check("... and both gateways execute the new tool", took is not None, took)
        tools = operator_metric(c, 'mcc_operator_mcpserver_tools{mcpserver="%s/changing"}' % UPSTREAM_NS)
        c.check("mcc_operator_mcpserver_tools shows its 2 tools", tools == 2, tools)
    finally:
        c.kube.run("-n", UPSTREAM_NS, "delete", "mcpservers.mcc.dev", "changing", "--ignore-not-found")
        stop_process(proc)


def steps(c, everything, port):
    c.check("server-everything runs as a host process", everything.start(), f"port {port}")
    url = f"http://127.0.0.1:{port}/mcp"
    c.kube.run("-n", UPSTREAM_NS, "create", "secret", "generic", "ev-token", f"--from-literal=header={TOKEN}")
    c.kube.apply([mcpserver("everything", {
        "url": url, "groups": ["public"], "prefix": "ev_", "include": ["echo", "get-sum"],
        "headers": [{"name": "Authorization", "secretKeyRef": {"name": "ev-token", "key": "header"}}],
        "refreshSeconds": 10, "timeout": 20})])
    cond = c.wait_ready("mcpservers.mcc.dev", "everything", UPSTREAM_NS, timeout=60)
    st = status(c, "everything")
    c.check("an MCPServer becomes Ready with its 2 included tools (1 more filtered)",
            bool(cond) and st.get("tools") == 2 and (st.get("filteredTools") or 0) > 0 and st.get("lastRefresh"),
            json.dumps(st)[:400])

    def published():
        # The status is written before the publisher's debounced write: wait for it.
        text = c.catalog_text()
        doc = json.loads(text) if text else {}
        keys = {t["tool"]["key"] for t in doc.get("tools", [])}
        ups = doc.get("upstreams", [])
        ok = {"public.ev_echo", "public.ev_get-sum"} <= keys \
            and any(u.get("url") == url and u.get("available") for u in ups)
        return (text, ups) if ok else None
    got, _ = wait_for(published, 30, 0.3)
    text, ups = got or (c.catalog_text(), None)
    c.check("the catalog holds its tools and the URL their calls go to, never the header's value",
            bool(got) and "e2e-upstream-token" not in text, json.dumps(ups)[:300])

    def served(base):
        s1, _ = http(f"{base}/v1/tools/public.ev_echo", c.alice_key)
        s2, body = http(f"{base}/v1/search?q=sum%20of%20two%20numbers", c.alice_key)
        return s1 == 200 and s2 == 200 and "public.ev_get-sum" in body
    took = c.on_every_gateway(served, 30)
    c.check("both gateways list and find its tools (REST describe and search)", took is not None, took)
    for base in c.bases():
        out, err = execute(c, base, "public.ev_get-sum", {"a": 2, "b": 3.5})
        c.check(f"execute of an upstream tool through {base} returns the upstream's result",
                not err and "5.5" in out, out[:200])

    # A host off the allow-list: refused on status, never published.
    c.kube.apply([mcpserver("elsewhere", {"url": f"http://localhost:{port}/mcp", "groups": ["public"]})])
    cond = c.wait_ready("mcpservers.mcc.dev", "elsewhere", UPSTREAM_NS, timeout=30, status="False")
    c.check("an MCPServer whose host is not on the egress allow-list is refused (UpstreamNotAllowed)",
            bool(cond) and cond.get("reason") == "UpstreamNotAllowed" and not status(c, "elsewhere").get("lastRefresh"),
            json.dumps(cond)[:300])

    # The upstream goes away: its tools stay, marked unavailable; calls fail at once.
    everything.stop()
    cond = c.wait_ready("mcpservers.mcc.dev", "everything", UPSTREAM_NS, timeout=60, status="False")
    c.check("the upstream gone: Ready=False Unreachable, its last good tools kept",
            bool(cond) and cond.get("reason") == "Unreachable" and status(c, "everything").get("tools") == 2,
            json.dumps(cond)[:300])

    def unavailable(base):
        s, _ = http(f"{base}/v1/tools/public.ev_echo", c.alice_key)
        out, err = execute(c, base, "public.ev_echo", {"message": "anyone?"})
        return s == 200 and err and "unavailable" in out
    took = c.on_every_gateway(unavailable, 30)
    c.check("... both gateways still list its tools and answer execute with 'unavailable' at once",
            took is not None, took)

    # And comes back: discovered again, Ready, served.
    c.check("server-everything restarted", everything.start())
    cond = c.wait_ready("mcpservers.mcc.dev", "everything", UPSTREAM_NS, timeout=60)
    c.check("the upstream back: Ready again", bool(cond), json.dumps(status(c, "everything"))[:300])
    took = c.on_every_gateway(
        lambda b: (lambda r: not r[1] and "hello again" in r[0])(
            execute(c, b, "public.ev_echo", {"message": "hello again"})), 30)
    c.check("... and both gateways execute its tools again", took is not None, took)
    c.kube.run("-n", UPSTREAM_NS, "delete", "mcpservers.mcc.dev", "everything", "elsewhere")
    gone, _ = wait_for(lambda: '"public.ev_echo"' not in c.catalog_text(), 30, 0.5)
    c.check("a deleted MCPServer's tools leave the catalog", bool(gone))


def make_ca(workdir):
    """A throwaway CA and a server certificate it signed for 127.0.0.1 (one day)."""
    d = os.path.join(workdir, "upstream-tls")
    os.makedirs(d, exist_ok=True)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    with open(p("san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for argv in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p("ca.key"), "-out", p("ca.crt"),
             "-days", "1", "-subj", "/CN=mcc-e2e-upstream-ca"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", p("server.key"), "-out", p("server.csr"),
             "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
             "-CAcreateserial", "-out", p("server.crt"), "-days", "1", "-extfile", p("san.ext")]):
        subprocess.run(["openssl", *argv], check=True, capture_output=True)
    return p("ca.crt"), p("server.crt"), p("server.key")


def custom_ca(c, port):
    ca, cert, key = make_ca(c.args.workdir)
    log = open(os.path.join(c.args.workdir, "tls-upstream.log"), "ab")
    proc = subprocess.Popen([sys.executable, CHANGING, str(port), cert, key], stdout=log, stderr=log)
    url = f"https://127.0.0.1:{port}/mcp"
    try:
        up, _ = wait_for(lambda: subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "--cacert", ca, url], capture_output=True).returncode == 0, 30, 0.2)
        c.check("an https upstream (official Python SDK) with a certificate from a CA made here", bool(up))
        with open(ca) as f:
            pem = f.read()
        c.kube.apply([{"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "upstream-ca", "namespace": UPSTREAM_NS}, "data": {"ca.crt": pem}},
                      {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "other-ca", "namespace": UPSTREAM_NS}, "data": {"ca.crt": pem}}])
        c.kube.apply([
            mcpserver("tls", {"url": url, "groups": ["public"], "prefix": "tls_",
                              "ca": {"configMapKeyRef": {"name": "upstream-ca", "key": "ca.crt"}}}),
            mcpserver("tls-noca", {"url": url, "groups": ["public"], "prefix": "noca_"}),
            mcpserver("tls-otherca", {"url": url, "groups": ["public"], "prefix": "other_",
                                      "ca": {"configMapKeyRef": {"name": "other-ca", "key": "ca.crt"}}})])
        cond = c.wait_ready("mcpservers.mcc.dev", "tls", UPSTREAM_NS, timeout=60)
        c.check("with its ca (a ConfigMap key) the https MCPServer is Ready with its tool",
                bool(cond) and status(c, "tls").get("tools") == 1, json.dumps(status(c, "tls"))[:300])
        took = c.on_every_gateway(
            lambda b: (lambda r: not r[1] and "first ran" in r[0])(execute(c, b, "public.tls_first", {})), 30)
        c.check("... and both gateways call it over https, trusting the same ConfigMap", took is not None, took)
        err, _ = wait_for(lambda: status(c, "tls-noca").get("lastError"), 60, 0.5)
        c.check("without a ca the same upstream is not trusted (Unreachable: the connection failed)",
                err == "the connection failed" and c.condition("mcpservers.mcc.dev", "tls-noca", UPSTREAM_NS)
                .get("reason") in ("Unreachable", "Discovering"), err)
        err, _ = wait_for(lambda: status(c, "tls-otherca").get("lastError"), 60, 0.5)
        c.check("a ca ConfigMap outside upstreams.caConfigMapNames cannot be read (the status says so)",
                bool(err) and "other-ca" in err and "may not read it" in err, err)
        projected_tokens(c, url)
    finally:
        c.kube.run("-n", UPSTREAM_NS, "delete", "mcpservers.mcc.dev", "tls", "tls-noca", "tls-otherca",
                   "tls-token", "tls-api-audience", "--ignore-not-found")
        stop_process(proc)


def jwt_claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def projected_tokens(c, url):
    """upstreams.tokenAudiences: the operator (discovery) and the gateways (calls) send
    their own ServiceAccount's token of the approved audience; the API server refuses
    that token; an MCPServer asking for the API server's audience is refused."""
    # What the kubelet projects into each Pod (the chart's volume), here TokenRequests
    # written where each host process looks (MCC_UPSTREAM_TOKEN_DIR).
    sub = hashlib.sha256(AUDIENCE.encode()).hexdigest()[:16]
    for name, sa in [(f"operator-{n}", f"{RELEASE}-operator") for n in (1, 2)] + \
                    [(f"gateway-{n}", f"{RELEASE}-gateway") for n in (1, 2)]:
        d = os.path.join(c.upstream_token_dir(name), sub)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "token"), "w") as f:
            f.write(c.kube.token(NS, sa, audience=AUDIENCE, duration="1h"))
    ca = {"configMapKeyRef": {"name": "upstream-ca", "key": "ca.crt"}}
    c.kube.apply([
        mcpserver("tls-token", {"url": url, "groups": ["public"], "prefix": "tok_", "ca": ca,
                                "serviceAccountToken": {"audience": AUDIENCE}}),
        mcpserver("tls-api-audience", {"url": url, "groups": ["public"], "prefix": "api_", "ca": ca,
                                       "serviceAccountToken": {
                                           "audience": "https://kubernetes.default.svc.cluster.local"}})])
    cond = c.wait_ready("mcpservers.mcc.dev", "tls-token", UPSTREAM_NS, timeout=60)
    c.check("an MCPServer with serviceAccountToken (an approved audience) is Ready", bool(cond),
            json.dumps(status(c, "tls-token"))[:300])
    took = c.on_every_gateway(
        lambda b: (lambda r: not r[1] and "first ran" in r[0])(execute(c, b, "public.tok_first", {})), 30)
    c.check("... and both gateways call it", took is not None, took)
    # The upstream serves https only: read what it saw through curl with the CA.
    seen = subprocess.run(["curl", "-s", "--cacert", os.path.join(c.args.workdir, "upstream-tls", "ca.crt"),
                           url.replace("/mcp", "/seen")], capture_output=True, text=True).stdout
    tokens = [h.split(" ", 1)[1] for h in json.loads(seen or "[]") if h.startswith("Bearer ")]
    subjects = {jwt_claims(t).get("sub") for t in tokens}
    audiences = {tuple(jwt_claims(t).get("aud") or []) for t in tokens}
    c.check("the upstream received the operator's and the gateway's own tokens, audience the approved one only",
            {f"system:serviceaccount:{NS}:{RELEASE}-operator", f"system:serviceaccount:{NS}:{RELEASE}-gateway"}
            <= subjects and audiences == {(AUDIENCE,)}, f"{sorted(s for s in subjects if s)} {audiences}")
    server, api_ca = c.kube.server()
    codes = {subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", api_ca,
                             "-H", f"Authorization: Bearer {t}", f"{server}/api"],
                            capture_output=True, text=True).stdout for t in set(tokens)}
    c.check("the API server refuses every token the upstream received (401)", codes == {"401"}, codes)
    cond = c.wait_ready("mcpservers.mcc.dev", "tls-api-audience", UPSTREAM_NS, timeout=30, status="False")
    c.check("an MCPServer asking for the API server's audience is refused (UpstreamNotAllowed)",
            bool(cond) and cond.get("reason") == "UpstreamNotAllowed" and "audience" in cond.get("message", ""),
            json.dumps(cond)[:300])


def session_context(c, port):
    log = open(os.path.join(c.args.workdir, "context-upstream.log"), "ab")
    proc = subprocess.Popen([sys.executable, CHANGING, str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        up, _ = wait_for(lambda: http(url)[0] not in (0,), 30, 0.2)
        c.check("a small upstream that records the _meta of its calls runs", bool(up))
        c.kube.apply([
            mcpserver("ctx", {"url": url, "groups": ["public"], "prefix": "ctx_",
                              "sessionContext": {"identity": True, "variables": ["project"]}}),
            mcpserver("ctx-plain", {"url": url, "groups": ["public"], "prefix": "plain_"})])
        ready = [c.wait_ready("mcpservers.mcc.dev", n, UPSTREAM_NS, timeout=60) for n in ("ctx", "ctx-plain")]
        c.check("MCPServers with and without sessionContext are Ready (identity allowed in their namespace)",
                all(ready), json.dumps(status(c, "ctx"))[:300])

        def published():
            doc = json.loads(c.catalog_text() or "{}")
            entry = [u for u in doc.get("upstreams", []) if u.get("server") == f"{UPSTREAM_NS}/ctx"]
            return entry[0].get("sessionContext") if entry else None
        declared, _ = wait_for(published, 30, 0.3)
        c.check("the catalog document carries its sessionContext for every replica",
                declared == {"identity": True, "variables": ["project"]}, declared)

        # The ConfigMap holds them before each gateway has loaded it.
        def served(base):
            return all(http(f"{base}/v1/tools/public.{key}", c.alice_key)[0] == 200
                       for key in ("ctx_first", "plain_first"))
        took = c.on_every_gateway(served, 30)
        c.check("both gateways serve the two upstreams' tools", took is not None, took)

        def metas():
            return json.loads(urllib.request.urlopen(url.replace("/mcp", "/metas"), timeout=10).read())
        for base in c.bases():
            before = len(metas())
            texts = mcp_session(base, c.alice_key, [
                ("set_session", {"name": "project", "value": "apollo"}),
                ("set_session", {"name": "other", "value": "not-declared"}),
                ("execute", {"key": "public.ctx_first", "params": {}}),
                ("execute", {"key": "public.plain_first", "params": {}})])
            seen = metas()[before:]
            mcc = [{k: v for k, v in m.items() if k.startswith("dev.mcc/")} for m in seen]
            c.check(f"through {base}: the upstream got alice's identity and only the declared variable, "
                    "and nothing where none is declared",
                    len(mcc) == 2 and mcc[0].get("dev.mcc/user") == "alice"
                    and mcc[0].get("dev.mcc/session") == {"project": "apollo"} and mcc[1] == {},
                    f"{texts} {mcc}"[:400])
    finally:
        c.kube.run("-n", UPSTREAM_NS, "delete", "mcpservers.mcc.dev", "ctx", "ctx-plain", "--ignore-not-found")
        stop_process(proc)
