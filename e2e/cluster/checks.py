"""The checks of the cluster e2e, in the order they run (e2e.py runs `run`). Each step
prints its own lines through `cluster.check`; a step that cannot go on raises."""
import base64
import json
import os
import secrets
import signal
import subprocess
import threading
import time

import yaml

from harness import (AUDIENCE, BULK_NS, CATALOG, NS, PODS_NS, RELEASE, REPO, TENANT_NS, grant, http,
                     mcp, mcp_session, tool)
from hostpod import wait_for
import upstreams

EXAMPLES = os.path.join(REPO, "examples", "k8s")
PROPAGATION = 5.0  # seconds: a change must reach every running gateway within this
METRICS_TOKEN_SECRET = f"{RELEASE}-gateway-metrics-token"  # the chart's, without gateway.metricsTokenSecret.name


def run(c):
    if os.environ.get("MCC_E2E_ONLY") == "upstreams":
        # A developer's short loop over the upstream checks (not a CI mode).
        c.start_operator(1)
        c.start_operator(2)
        examples(c)
        gateways(c)
        upstreams.run(c)
        return
    chart_objects(c)
    c.start_operator(1)
    c.start_operator(2)
    examples(c)
    admission(c)
    gateways(c)
    metrics_token(c)
    credentials(c)
    forged_token_flood(c)
    pending_sa = deleted_service_account_start(c)
    propagation(c)
    tenancy(c)
    session_keys(c)
    upstreams.run(c)
    pod_runtime(c)
    budget(c)
    least_privilege(c)
    operator_secret_writes(c)
    shards(c)
    leader_election(c)
    deleted_service_account_end(c, pending_sa)
    upgrade_and_uninstall(c, c.args.helm, c.args.values)


def chart_objects(c):
    """What `helm install` created, as the API server accepted it."""
    for kind, name, ns in [("deployment", f"{RELEASE}-operator", NS), ("deployment", f"{RELEASE}-gateway", NS),
                           ("service", f"{RELEASE}-gateway", NS), ("serviceaccount", f"{RELEASE}-gateway", NS),
                           ("serviceaccount", f"{RELEASE}-operator", NS), ("networkpolicy", f"{RELEASE}-gateway", NS),
                           ("poddisruptionbudget", f"{RELEASE}-gateway", NS),
                           ("horizontalpodautoscaler", f"{RELEASE}-gateway", NS),
                           ("clusterrole", f"{RELEASE}-{NS}-operator", None),
                           ("role", f"{RELEASE}-{NS}-gateway-pods", PODS_NS),  # podRuntime.namespaces
                           ("role", f"{RELEASE}-{NS}-gateway-references", NS),  # local-runtime namespaces
                           ("configmap", CATALOG, NS), ("lease", f"{RELEASE}-operator", NS),
                           ("secret", METRICS_TOKEN_SECRET, NS),
                           ("networkpolicy", f"{RELEASE}-pod-tools", PODS_NS),
                           ("crd", "tools.mcc.dev", None), ("crd", "usergrants.mcc.dev", None)]:
        c.check(f"helm install created {kind} {name}", c.kube.get(kind, name, ns, check=False) is not None)


def examples(c):
    """examples/k8s: every Tool and UserGrant Ready, the catalog lists them, no secrets."""
    c.kube.run("apply", "-f", os.path.join(EXAMPLES, "namespace.yaml"))
    c.kube.run("apply", "-f", EXAMPLES)
    tools = c.kube.items("tools.mcc.dev", NS)
    grants = c.kube.items("usergrants.mcc.dev", NS)
    for obj in tools:
        name = obj["metadata"]["name"]
        cond = c.wait_ready("tools.mcc.dev", name, NS, timeout=60)
        c.check(f"example Tool {name} Ready", bool(cond), c.condition("tools.mcc.dev", name, NS))
    for obj in grants:
        name = obj["metadata"]["name"]
        cond = c.wait_ready("usergrants.mcc.dev", name, NS, timeout=60)
        c.check(f"example UserGrant {name} Ready", bool(cond), c.condition("usergrants.mcc.dev", name, NS))
    keys = [((c.kube.get("tools.mcc.dev", o["metadata"]["name"], NS).get("status") or {}).get("key"))
            for o in tools]
    text, _ = wait_for(lambda: (t := c.catalog_text()) and all(k and f'"{k}"' in t for k in keys) and t, 30, 0.5)
    c.check(f"the catalog ConfigMap lists every example key ({len(keys)})", bool(text), keys)
    key = c.api_key("alice")
    c.check("alice's API key was minted into Secret alice-api-key", bool(key))
    c.check("the catalog holds no secret value (the Secret's token, alice's key)",
            bool(text) and "change-me" not in text and key and key not in text)
    c.alice_key = key


def admission(c):
    """Invalid Tools are refused by the API server: the CRD's schema and its CEL rules."""
    bad = [("schema: groups is a string", {"name": "bad", "groups": "ops", "exec": "true"}, "groups"),
           ("CEL: exec and curl both set", {"name": "bad", "groups": ["ops"], "exec": "true", "curl": "x"},
            "exactly one of exec, fn or curl"),
           ("CEL: exec without a name", {"groups": ["ops"], "exec": "true"}, "must specify a name")]
    for what, spec, expect in bad:
        proc = c.kube.apply([tool("bad-tool", NS, spec)], check=False)
        c.check(f"invalid Tool refused at admission ({what})", proc.returncode != 0 and expect in proc.stderr,
                proc.stderr.strip()[-300:] or "accepted")


def gateways(c):
    for n in (1, 2):
        gw, base = c.start_gateway(n)
    def ready(base):
        status, body = http(f"{base}/readyz")
        return status == 200
    took = c.on_every_gateway(ready, 60)
    c.check("two gateways ready on the operator's catalog", took is not None,
            "; ".join(g.log_tail(5) for g, _, _ in c.gateways))
    if took is None:
        raise RuntimeError("the gateways never became ready")


def secret_value(c, name, key, namespace=NS):
    obj = c.kube.get("secret", name, namespace, check=False)
    data = ((obj or {}).get("data") or {}).get(key)
    return base64.b64decode(data).decode() if data else None


def metrics_token(c):
    """/metrics wants the token of the chart's Secret (tools share the pod's loopback, issue
    32): it reaches the gateway container only, and the gateway refuses a scrape without
    it. The pod-runtime namespaces' NetworkPolicy selects the tool Pods and admits nothing."""
    spec = c.kube.get("deployment", f"{RELEASE}-gateway", NS)["spec"]["template"]["spec"]
    env = {ctr["name"]: {e["name"]: e for e in ctr.get("env") or []} for ctr in spec["containers"]}
    ref = ((env["gateway"].get("MCC_METRICS__TOKEN") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    c.check(f"the gateway container reads MCC_METRICS__TOKEN from Secret {METRICS_TOKEN_SECRET}",
            ref.get("name") == METRICS_TOKEN_SECRET, ref)
    c.check("the executor container has no MCC_METRICS__TOKEN", "MCC_METRICS__TOKEN" not in env["executor"])
    token = secret_value(c, METRICS_TOKEN_SECRET, ref.get("key", "token"))
    c.check("the chart generated a /metrics token of 48 characters", token is not None and len(token) == 48,
            len(token or ""))
    c.metrics_token = token
    url = f"http://127.0.0.1:{c.args.port_base + 1 + 100}/metrics"  # gateway 1's MCC_METRICS__PORT
    status, _ = http(url)
    c.check("/metrics without a token: 401", status == 401, status)
    status, _ = http(url, "not-the-token")
    c.check("/metrics with a wrong token: 401", status == 401, status)
    status, body = http(url, token)
    c.check("/metrics with the Secret's token: 200, Prometheus text", status == 200 and "mcc_" in body,
            f"{status} {body[:200]}")

    policy = c.kube.get("networkpolicy", f"{RELEASE}-pod-tools", PODS_NS, check=False) or {}
    pspec = policy.get("spec") or {}
    c.check(f"NetworkPolicy {RELEASE}-pod-tools in {PODS_NS} selects this release's tool Pods",
            (pspec.get("podSelector") or {}).get("matchLabels") == {
                "app.kubernetes.io/managed-by": "mcc-gateway", "app.kubernetes.io/instance": RELEASE},
            pspec.get("podSelector"))
    c.check("... and admits no ingress", set(pspec.get("policyTypes") or []) == {"Ingress", "Egress"}
            and not pspec.get("ingress"), pspec.get("ingress"))
    egress = pspec.get("egress") or []
    dns = [r for r in egress if any(p.get("port") == 53 for p in r.get("ports") or [])]
    c.check("... DNS only to the cluster DNS", bool(dns) and all(r.get("to") for r in dns), dns)
    excepted = {x for r in egress for peer in r.get("to") or [] for x in (peer.get("ipBlock") or {}).get("except") or []}
    c.check("... no link-local or metadata address", {"169.254.0.0/16", "fd00:ec2::254/128"} <= excepted, excepted)


def credentials(c):
    """API key and ServiceAccount tokens (TokenReview for real), through the official SDK."""
    base = c.bases()[0]
    text, err = mcp(base, c.alice_key, "execute", {"key": "ops.whoami_echo", "params": {}}, mode="legacy")
    c.check("SDK (legacy) with alice's API key: execute ops.whoami_echo says alice",
            not err and "called by alice" in text, text[:300])
    sa_token = c.kube.token("agents", "research-agent", audience=AUDIENCE)
    text, err = mcp(c.bases()[1], sa_token, "whoami", {}, mode="2026-07-28")
    c.check("SDK (2026-07-28) with research-agent's ServiceAccount token: whoami is research-agent",
            not err and "research-agent" in text, text[:300])
    text, err = mcp(c.bases()[1], sa_token, "execute",
                    {"key": "reports.title_case", "params": {"s": "hello real cluster"}}, mode="2026-07-28")
    c.check("SDK (2026-07-28): execute reports.title_case with the token", not err and "Hello Real Cluster" in text,
            text[:300])
    other = c.kube.token("agents", "research-agent")  # the API server's own audience
    status, body = http(f"{base}/v1/whoami", other)
    c.check("a token of another audience is refused (401)", status == 401, f"{status} {body[:200]}")
    text, err = mcp(base, other, "whoami", {})
    c.check("... and through the SDK", err and "(HTTP [401])" in text, text[:200])


def forged_token_flood(c):
    """Issue 32, item 3: made-up and forged bearer tokens, far more than the review
    budget, are refused by the signature check without spending it, so a new genuine
    token right after still works."""
    base = c.bases()[0]
    real = c.kube.token("agents", "research-agent", audience=AUDIENCE)
    head, payload, signature = real.split(".")
    forged = [f"{head}.{payload}.{secrets.token_urlsafe(len(signature) * 3 // 4)}" for _ in range(150)]
    forged += [secrets.token_urlsafe(40) for _ in range(150)]
    statuses = {}
    lock = threading.Lock()

    def send(token):
        status, _ = http(f"{base}/v1/whoami", token)
        with lock:
            statuses[status] = statuses.get(status, 0) + 1
    threads = [threading.Thread(target=send, args=(t,)) for t in forged]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    c.report.timing("300 forged tokens refused", time.monotonic() - started)
    c.check("300 forged tokens (re-signed and made up) are all refused 401, none 503",
            statuses == {401: len(forged)}, statuses)
    fresh = c.kube.token("agents", "research-agent", audience=AUDIENCE)
    c.check("a new genuine token right after the flood is accepted",
            c.whoami(base, fresh) == "research-agent", fresh[:20])


def deleted_service_account_start(c):
    """A ServiceAccount that is deleted: its token must stop working within the cache
    bound of docs/auth.md. A thread polls both gateways from the deletion on, while the
    next steps run; deleted_service_account_end reads what it saw."""
    c.kube.run("-n", "agents", "create", "serviceaccount", "doomed-agent")
    c.kube.apply([grant("doomed-agent", NS, {"username": "doomed-agent", "groups": ["reports"],
                                              "serviceAccounts": [{"namespace": "agents", "name": "doomed-agent"}]})])
    token = c.kube.token("agents", "doomed-agent", audience=AUDIENCE)
    took = c.on_every_gateway(lambda b: c.whoami(b, token) == "doomed-agent", 15)
    c.check("a new ServiceAccount's token works once its grant is published", took is not None)
    c.kube.run("-n", "agents", "delete", "serviceaccount", "doomed-agent")
    seen = {}
    def poll():
        refused, took = wait_for(lambda: all(c.whoami(b, token) == 401 for b in c.bases()), 120, 0.5)
        seen["took"] = took if refused else None
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread, seen


def deleted_service_account_end(c, pending):
    thread, seen = pending
    thread.join(130)
    took = seen.get("took")
    bound = 60 + 10 + 5  # the gateway remembers 60 s, the API server 10 s; polling slack
    c.report.timing("deleted ServiceAccount's token refused", took or -1)
    c.check(f"a deleted ServiceAccount's token is refused on both gateways within {bound} s "
            f"({took and round(took)} s)", took is not None and took <= bound)


def propagation(c):
    """A Tool change, an API-key rotation and a UserGrant removal reach both gateways."""
    marker = secrets.token_hex(4)
    start = time.monotonic()
    c.kube.run("-n", NS, "patch", "tools.mcc.dev", "public.greet", "--type", "merge",
               "-p", json.dumps({"spec": {"description": f"Greet someone by name ({marker})."}}))

    def sees(base):
        status, body = http(f"{base}/v1/tools/public.greet", c.alice_key)
        return status == 200 and marker in body
    took = c.on_every_gateway(sees, 30)
    c.check("a Tool change reaches both gateways within 5 s", took is not None and took <= PROPAGATION, took)
    c.report.timing("Tool change -> both gateways", took or -1)

    old = c.alice_key
    c.kube.run("-n", NS, "delete", "secret", "alice-api-key")
    start = time.monotonic()
    new, _ = wait_for(lambda: (k := c.api_key("alice")) and k != old and k, 30, 0.1)
    took = c.on_every_gateway(lambda b: c.whoami(b, old) == 401 and c.whoami(b, new) == "alice", 30)
    took = time.monotonic() - start if took is not None else None
    c.check("API-key rotation (Secret deleted): the new key works and the old one is refused on both "
            "gateways within 5 s", took is not None and took <= PROPAGATION, took)
    c.report.timing("API-key rotation -> both gateways", took or -1)
    c.alice_key = new or old

    c.kube.apply([grant("bob", NS, {"username": "bob", "groups": ["public"], "apiKey": {"enabled": True}})])
    bob, _ = wait_for(lambda: c.api_key("bob"), 30, 0.2)
    c.on_every_gateway(lambda b: c.whoami(b, bob) == "bob", 30)
    start = time.monotonic()
    c.kube.run("-n", NS, "delete", "usergrants.mcc.dev", "bob")
    took = c.on_every_gateway(lambda b: c.whoami(b, bob) == 401, 30)
    c.check("a UserGrant removal revokes its key on both gateways within 5 s",
            took is not None and took <= PROPAGATION, took)
    c.report.timing("UserGrant removal -> both gateways", took or -1)
    gone, _ = wait_for(lambda: c.kube.get("secret", "bob-api-key", NS, check=False) is None, 30, 0.5)
    c.check("... and garbage collection deletes its API-key Secret", bool(gone))


def tenancy(c):
    """docs/security.md: grants count in trusted namespaces only; the local runtime is for
    the namespaces allowed it; pod Tools go where the pod runtime is allowed."""
    c.kube.apply([grant("mallory", TENANT_NS, {"username": "mallory", "groups": ["admin", "ops"],
                                                "apiKey": {"enabled": True}})])
    cond = c.wait_ready("usergrants.mcc.dev", "mallory", TENANT_NS, timeout=30, status="False")
    c.check("a UserGrant in an untrusted namespace is Ready=False, reason UntrustedNamespace",
            bool(cond) and cond.get("reason") == "UntrustedNamespace", c.condition("usergrants.mcc.dev", "mallory", TENANT_NS))
    time.sleep(1.5)
    text = c.catalog_text()
    c.check("... and adds no user and mints no key", '"mallory"' not in text
            and c.kube.get("secret", "mallory-api-key", TENANT_NS, check=False) is None)

    c.kube.apply([tool("local-tool", TENANT_NS, {"name": "sneaky", "groups": ["public"], "exec": "id"})])
    cond = c.wait_ready("tools.mcc.dev", "local-tool", TENANT_NS, timeout=30, status="False")
    c.check("a local-runtime Tool outside the local-runtime namespaces is refused (LocalRuntimeNotAllowed)",
            bool(cond) and cond.get("reason") == "LocalRuntimeNotAllowed", c.condition("tools.mcc.dev", "local-tool", TENANT_NS))

    pod_tool = {"name": "slow", "groups": ["public"], "description": "Sleeps in a Pod.",
                "exec": "sleep 30", "runtime": {"pod": {}}, "limits": {"timeout": 4}}
    c.kube.apply([tool("slow", PODS_NS, pod_tool),
                  tool("bad-image", PODS_NS, dict(pod_tool, name="bad_image",
                                                  runtime={"pod": {"image": "evil.example.com/miner:1"}})),
                  tool("bad-sa", PODS_NS, dict(pod_tool, name="bad_sa",
                                               runtime={"pod": {"serviceAccountName": "cluster-admin-sa"}}))])
    cond = c.wait_ready("tools.mcc.dev", "slow", PODS_NS, timeout=30)
    c.check("a pod Tool in a pod-runtime namespace is Ready", bool(cond), c.condition("tools.mcc.dev", "slow", PODS_NS))
    for name, what in [("bad-image", "a forbidden image"), ("bad-sa", "a forbidden ServiceAccount")]:
        cond = c.wait_ready("tools.mcc.dev", name, PODS_NS, timeout=30, status="False")
        c.check(f"a pod Tool asking for {what} is refused (PodSpecNotAllowed)",
                bool(cond) and cond.get("reason") == "PodSpecNotAllowed", c.condition("tools.mcc.dev", name, PODS_NS))


def session_keys(c):
    """Issue 32, item 7: a Tool outside the trusted namespaces receives only the session
    variables its sessionKeys lists; `["*"]` there is refused."""
    read = ("python3 -c 'import os, json; print(json.dumps({k[8:].lower(): v for k, v in "
            "os.environ.items() if k.startswith(\"MCC_CTX_\")}))'")
    ns = BULK_NS[0]  # a local-runtime namespace, not a trusted one
    c.kube.apply([tool("ctx-reader", ns, {"name": "ctx_reader", "groups": ["public"], "exec": read,
                                           "sessionKeys": ["cursor"]}),
                  tool("ctx-greedy", ns, {"name": "ctx_greedy", "groups": ["public"], "exec": read,
                                           "sessionKeys": ["*"]})])
    cond = c.wait_ready("tools.mcc.dev", "ctx-greedy", ns, timeout=30, status="False")
    c.check("sessionKeys: ['*'] outside the trusted namespaces is refused (SessionKeysNotAllowed)",
            bool(cond) and cond.get("reason") == "SessionKeysNotAllowed", c.condition("tools.mcc.dev", "ctx-greedy", ns))
    c.check("a Tool declaring sessionKeys there is Ready", bool(c.wait_ready("tools.mcc.dev", "ctx-reader", ns)))
    base = c.bases()[0]
    wait_for(lambda: http(f"{base}/v1/tools/public.ctx_reader", c.alice_key)[0] == 200, 30, 0.3)

    texts = mcp_session(base, c.alice_key, [("set_session", {"name": "cursor", "value": 7}),
                                            ("set_session", {"name": "target", "value": "db"}),
                                            ("execute", {"key": "public.ctx_reader", "params": {}})])
    text = texts[-1]
    try:
        seen = json.loads(text)
    except ValueError:
        seen = {}
    c.check("... and receives the identity and its declared variable, not the others",
            seen.get("cursor") == "7" and "target" not in seen and seen.get("user") == "alice", text[:300])


def pod_runtime(c):
    """A `runtime: pod` call against the real API: its Pod and Secret are created as the
    golden files say and admitted by Pod Security `restricted`; no node runs it, so the
    call times out and both are deleted."""
    base = c.bases()[0]
    took = c.on_every_gateway(lambda b: http(f"{b}/v1/tools/public.slow", c.alice_key)[0] == 200, 15)
    c.check("the pod Tool is served", took is not None)
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=http(f"{base}/v1/tools/public.slow", c.alice_key, method="POST", body={}, timeout=60)))
    t.start()
    sel = "app.kubernetes.io/managed-by=mcc-gateway"
    pods, _ = wait_for(lambda: c.kube.items("pods", PODS_NS, sel), 10, 0.2)
    c.check("the call's Pod is created (admitted under Pod Security `restricted`)", bool(pods))
    # ... which the namespace does enforce: a Pod without the restricted settings is refused.
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": PODS_NS},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    proc = c.kube.apply([plain], check=False)
    c.check("... which the namespace enforces: a Pod without those settings is refused",
            proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr.strip()[-200:])
    if pods:
        pod = pods[0]
        golden = yaml.safe_load(open(os.path.join(REPO, "gateway/src/kube/pods/golden/exec.yaml")))
        diffs = compare_to_golden(golden, pod)
        c.check("the Pod is as the golden file says (labels, security context, containers, volumes)",
                not diffs, "; ".join(diffs))
        secret_name = next(v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v)
        secret = c.kube.get("secret", secret_name, PODS_NS, check=False)
        c.check("the call's input Secret exists while the call runs", secret is not None)
        held = "".join(base64.b64decode(v).decode(errors="replace") for v in ((secret or {}).get("data") or {}).values())
        c.check("... holding no passthrough value the Tool does not admit",
                bool(held) and "not-for-tools-that-do-not-ask" not in held)
    t.join(70)
    status, body = result.get("r", (0, "no answer"))
    c.check("the call ends at its timeout with an error naming why (no node to schedule the Pod)",
            status == 500 and "still not scheduled when the call's timeout passed" in body, f"{status} {body[:300]}")
    if pods:
        gone, _ = wait_for(lambda: not c.kube.items("pods,secrets", PODS_NS, sel), 30, 0.5)
        c.check("the call's Pod and Secret are deleted after the timeout", bool(gone))


def budget(c):
    """A namespace over its catalog budget (values.yaml: 16Ki for the pod namespace): its
    newest Tool is refused on its status, its older ones stay, and a UserGrant removal
    still reaches both gateways."""
    big = "hog " * 3000  # 12,000 characters: under the description limit, over half the budget
    spec = {"groups": ["public"], "exec": "echo hog", "runtime": {"pod": {}}, "description": big}
    c.kube.apply([tool("hog-old", PODS_NS, dict(spec, name="hog_old"))])
    cond = c.wait_ready("tools.mcc.dev", "hog-old", PODS_NS, timeout=30)
    c.check("a Tool within its namespace's budget is Ready", bool(cond),
            c.condition("tools.mcc.dev", "hog-old", PODS_NS))
    time.sleep(1.1)  # a later creationTimestamp (whole seconds): the newer one is refused
    c.kube.apply([tool("hog-new", PODS_NS, dict(spec, name="hog_new"))])
    cond = c.wait_ready("tools.mcc.dev", "hog-new", PODS_NS, timeout=30, status="False")
    c.check("the newest Tool of a namespace over its budget is refused (NamespaceBudgetExceeded)",
            bool(cond) and cond.get("reason") == "NamespaceBudgetExceeded"
            and "over its budget of 16384 bytes" in cond.get("message", ""),
            c.condition("tools.mcc.dev", "hog-new", PODS_NS))
    old = c.condition("tools.mcc.dev", "hog-old", PODS_NS)
    c.check("... while its older Tool stays Ready", bool(old) and old.get("status") == "True", old)
    served = c.on_every_gateway(lambda b: http(f"{b}/v1/tools/public.hog_old", c.alice_key)[0] == 200
                                and http(f"{b}/v1/tools/public.hog_new", c.alice_key)[0] == 404, 30)
    c.check("... and both gateways serve the older one, not the newer one", served is not None)

    c.kube.apply([grant("carol", NS, {"username": "carol", "groups": ["public"], "apiKey": {"enabled": True}})])
    carol, _ = wait_for(lambda: c.api_key("carol"), 30, 0.2)
    c.on_every_gateway(lambda b: c.whoami(b, carol) == "carol", 30)
    c.kube.run("-n", NS, "delete", "usergrants.mcc.dev", "carol")
    took = c.on_every_gateway(lambda b: c.whoami(b, carol) == 401, 30)
    c.check("... and a UserGrant removal still revokes its key on both gateways within 5 s",
            took is not None and took <= PROPAGATION, took)
    c.kube.run("-n", PODS_NS, "delete", "tools.mcc.dev", "hog-old", "hog-new")


def compare_to_golden(golden, pod):
    """Differences in what the golden file fixes (values that vary per call aside)."""
    diffs = []
    gs, ps = golden["spec"], pod["spec"]
    for key in ("automountServiceAccountToken", "enableServiceLinks", "restartPolicy", "securityContext"):
        if gs.get(key) != ps.get(key):
            diffs.append(f"spec.{key}: {ps.get(key)!r} != {gs.get(key)!r}")
    if sorted(golden["metadata"]["labels"]) != sorted(k for k in pod["metadata"]["labels"]):
        diffs.append(f"label keys {sorted(pod['metadata']['labels'])}")
    for part in ("containers", "initContainers"):
        for g, p in zip(gs.get(part, []), ps.get(part, [])):
            for key in ("name", "command", "securityContext"):
                if g.get(key) != p.get(key):
                    diffs.append(f"{part}.{g['name']}.{key}: {p.get(key)!r}")
            if sorted(m["mountPath"] for m in g.get("volumeMounts", [])) != \
                    sorted(m["mountPath"] for m in p.get("volumeMounts", [])):
                diffs.append(f"{part}.{g['name']}.volumeMounts")
    if sorted(v["name"] for v in gs["volumes"]) != sorted(v["name"] for v in ps["volumes"]):
        diffs.append("volume names")
    return diffs


def least_privilege(c):
    """kubectl auth can-i, asked of the API server, for each chart ServiceAccount."""
    gw = f"system:serviceaccount:{NS}:{RELEASE}-gateway"
    op = f"system:serviceaccount:{NS}:{RELEASE}-operator"
    cases = [
        # The gateway lists and watches with fieldSelector metadata.name=<catalog>, which
        # RBAC authorizes as that name.
        (gw, "yes", ["watch", f"configmaps/{CATALOG}"], NS),
        (gw, "no", ["watch", "configmaps"], NS),
        (gw, "yes", ["get", f"configmaps/{CATALOG}-shard-b-15"], NS),
        (gw, "yes", ["create", "tokenreviews.authentication.k8s.io"], None),
        (gw, "yes", ["get", "secrets/ops-api"], NS),
        (gw, "yes", ["create", "pods"], PODS_NS),
        (gw, "yes", ["get", "pods/log"], PODS_NS),
        (gw, "no", ["list", "secrets"], NS),
        (gw, "no", ["get", "secrets/anything"], "kube-system"),
        (gw, "no", ["get", "secrets/anything"], TENANT_NS),
        (gw, "no", ["create", "pods"], "default"),
        (gw, "no", ["create", "pods"], TENANT_NS),
        # Issue 32, item 6: Secrets are read only where Tools run locally, Pods made only
        # where pod Tools run.
        (gw, "no", ["get", "secrets/anything"], PODS_NS),
        (gw, "no", ["create", "pods"], "kube-system"),
        (gw, "no", ["create", "secrets"], TENANT_NS),
        (gw, "no", ["create", "pods"], BULK_NS[0]),
        (gw, "no", ["patch", f"configmaps/{CATALOG}"], NS),
        (op, "yes", ["patch", f"configmaps/{CATALOG}-shard-a-0"], NS),
        (op, "yes", ["delete", f"configmaps/{CATALOG}-shard-b-15"], NS),
        (op, "yes", ["get", f"configmaps/{CATALOG}-shard-a-3"], NS),  # read back at start
        (op, "yes", ["patch", "tools.mcc.dev/x", "--subresource", "status"], TENANT_NS),
        (op, "yes", ["list", "secrets"], NS),
        (op, "no", ["list", "secrets"], TENANT_NS),
        (op, "no", ["get", "secrets/anything"], "kube-system"),
        (op, "no", ["delete", "configmaps/some-other-configmap"], NS),
        (op, "no", ["create", "pods"], NS),
        (op, "no", ["update", "tools.mcc.dev/x"], NS),
        # Issue 33: MCPServer header Secrets, read (get only) by name where upstreams are
        # allowed, by the operator (discovery) and the gateway (calls).
        (op, "yes", ["get", "secrets/ev-token"], upstreams.UPSTREAM_NS),
        (gw, "yes", ["get", "secrets/ev-token"], upstreams.UPSTREAM_NS),
        (op, "no", ["get", "secrets/other"], upstreams.UPSTREAM_NS),
        (gw, "no", ["list", "secrets"], upstreams.UPSTREAM_NS),
        # ... and their `ca` ConfigMaps, by name (upstreams.caConfigMapNames).
        (op, "yes", ["get", "configmaps/upstream-ca"], upstreams.UPSTREAM_NS),
        (gw, "yes", ["get", "configmaps/upstream-ca"], upstreams.UPSTREAM_NS),
        (op, "no", ["get", "configmaps/other-ca"], upstreams.UPSTREAM_NS),
        (gw, "no", ["list", "configmaps"], upstreams.UPSTREAM_NS),
        (op, "yes", ["patch", "mcpservers.mcc.dev/x", "--subresource", "status"], upstreams.UPSTREAM_NS),
        (op, "no", ["update", "mcpservers.mcc.dev/x"], upstreams.UPSTREAM_NS),
    ]
    for who, want, verb, ns in cases:
        args = ["auth", "can-i", "--as", who] + verb + (["-n", ns] if ns else [])
        got = c.kube.run(*args, check=False).stdout.strip()
        c.check(f"can-i {who.rsplit(':', 1)[1]} {' '.join(verb)}{f' -n {ns}' if ns else ''} -> {want}",
                got == want, got)


def operator_secret_writes(c):
    """Issue 32, item 14: the operator's Role in a trusted namespace covers every Secret
    there; the chart's ValidatingAdmissionPolicy lets it write only the ones it manages."""
    op = f"system:serviceaccount:{NS}:{RELEASE}-operator"
    refused = "writes only the API-key Secrets it manages"
    r = c.kube.run("--as", op, "-n", NS, "create", "secret", "generic", "rogue", "--from-literal=a=b", check=False)
    c.check("the operator's ServiceAccount cannot create an unmanaged Secret (admission policy)",
            r.returncode != 0 and refused in r.stderr, r.stderr[-300:])
    r = c.kube.run("--as", op, "-n", NS, "delete", "secret", METRICS_TOKEN_SECRET, check=False)
    c.check("... nor delete one (the chart's /metrics token)", r.returncode != 0 and refused in r.stderr,
            r.stderr[-300:])
    managed = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "managed-probe", "namespace": NS, "labels": {"app.kubernetes.io/managed-by": "mcc-operator"}},
        "stringData": {"a": "b"}}
    r = c.kube.run("--as", op, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(managed), check=False)
    c.check("... while a Secret it manages (its label) is admitted", r.returncode == 0, r.stderr[-300:])


def shards(c):
    """A catalog too large for one object: published as shards with the chart's RBAC and
    served by both gateways (RBAC scope `namespaces`)."""
    n = c.args.bulk_tools
    objs = [tool(f"bulk-{i}", BULK_NS[i % len(BULK_NS)], {
        "name": f"bulk_{i}", "groups": ["public"], "exec": "echo bulk",
        # Incompressible: random bytes, base64 (gzip keeps ~3/4 of it).
        "description": "Bulk tool " + secrets.token_urlsafe(3000)}) for i in range(n)]
    start = time.monotonic()
    c.kube.apply(objs)
    applied = time.monotonic()
    c.report.timing(f"apply of {n} Tools", applied - start)

    def index():
        cm = c.kube.get("configmap", CATALOG, NS, check=False) or {}
        raw = (cm.get("data") or {}).get("shards.json")
        return json.loads(raw) if raw else None
    idx, _ = wait_for(lambda: (i := index()) and len(i["shards"]) >= 2 and i, 120, 0.5)
    c.check(f"{n} Tools with incompressible descriptions publish as shards (index names "
            f"{len(idx['shards']) if idx else 0} >= 2)", bool(idx))
    took = c.on_every_gateway(lambda b: http(f"{b}/v1/tools/public.bulk_{n - 1}", c.alice_key)[0] == 200, 120)
    c.check("both gateways serve the sharded catalog (the shards read with the chart's RBAC)", took is not None,
            "; ".join(g.log_tail(3) for g, _, _ in c.gateways))
    if took is not None:
        c.report.timing(f"last apply -> both gateways serve the sharded catalog ({n} Tools)",
                        time.monotonic() - applied)
    ready = sum(1 for o in c.kube.items("tools.mcc.dev")
                if o["metadata"]["name"].startswith("bulk-")
                and any(x["type"] == "Ready" and x["status"] == "True" for x in (o.get("status") or {}).get("conditions", [])))
    c.check(f"every bulk Tool is Ready ({ready}/{n})", ready == n)
    c.shard_names = [s["name"] for s in idx["shards"]] if idx else []


def leader_election(c):
    """Kill the leader; the other replica takes over and nothing is lost."""
    lease = c.kube.get("lease", f"{RELEASE}-operator", NS)
    holder = lease["spec"].get("holderIdentity")
    leader = next((o for o in c.operators if o.name == holder), None)
    c.check(f"one operator holds the Lease ({holder})", leader is not None, holder)
    if leader is None:
        return
    # The chart's empty Lease is taken once (transitions 1); a leader starved of its
    # renewals during the bulk publish would have lost it (and exited).
    transitions = lease["spec"].get("leaseTransitions")
    c.check("no leader change while the bulk Tools were published (both replicas up, leaseTransitions 1)",
            transitions == 1 and all(o.alive() for o in c.operators), f"leaseTransitions {transitions}")
    before = c.catalog_text()
    leader.stop(signal.SIGKILL)
    start = time.monotonic()
    c.kube.apply([tool("after-failover", NS, {"name": "after_failover", "groups": ["public"], "exec": "echo ok"})])
    cond = c.wait_ready("tools.mcc.dev", "after-failover", NS, timeout=60)
    took = time.monotonic() - start
    c.check("after the leader is killed, the other operator reconciles a new Tool", bool(cond))
    c.report.timing("leader killed -> new Tool Ready", took)
    served = c.on_every_gateway(lambda b: http(f"{b}/v1/tools/public.after_failover", c.alice_key)[0] == 200, 60)
    c.check("... and publishes it to both gateways", served is not None)
    after = c.catalog_text()
    old_keys = {t["tool"]["key"] for t in json.loads(before)["tools"]} if before else set()
    new_keys = {t["tool"]["key"] for t in json.loads(after)["tools"]} if after else set()
    c.check(f"nothing is lost: every key of before the failover is still published ({len(old_keys)})",
            old_keys and old_keys <= new_keys, sorted(old_keys - new_keys)[:5])


def upgrade_and_uninstall(c, helm, values):
    """`helm upgrade` with changed values, then `helm uninstall`: nothing is left but the
    CRDs (kept on purpose, with the Tools and UserGrants in them).

    The upgrade also takes the release namespace out of the local-runtime namespaces,
    and so out of the gateway's referenced namespaces: until then its Role there (`get`
    on every ConfigMap) hid whether the shard rule alone lets a gateway read a sharded
    catalog. A gateway started after the upgrade must."""
    c.stop_all()
    base = [helm, "--kubeconfig", c.args.kubeconfig, "-n", NS]
    others = ",".join(BULK_NS)
    proc = subprocess.run(base + ["upgrade", RELEASE, os.path.join(REPO, "charts/mcc"), "-f", values,
                                  "--set", "gateway.logLevel=debug",
                                  "--set", f"operator.localRuntimeNamespaces={{{others}}}"],
                          capture_output=True, text=True)
    c.check("helm upgrade with changed values", proc.returncode == 0, proc.stderr[-300:])
    token = secret_value(c, METRICS_TOKEN_SECRET, "token")
    c.check("... keeps the generated /metrics token (lookup)", token is not None and token == c.metrics_token)
    env = {e["name"]: e.get("value") for e in c.kube.get("deployment", f"{RELEASE}-gateway", NS)
           ["spec"]["template"]["spec"]["containers"][0]["env"]}
    c.check("... the gateway Deployment carries them (MCC_LOG=debug)", env.get("MCC_LOG") == "debug", env.get("MCC_LOG"))
    gw = f"system:serviceaccount:{NS}:{RELEASE}-gateway"
    for verb, want in [(f"configmaps/{CATALOG}-shard-a-1", "yes"), ("configmaps/ops-settings", "no")]:
        got = c.kube.run("auth", "can-i", "--as", gw, "get", verb, "-n", NS, check=False).stdout.strip()
        c.check(f"after the upgrade: can-i {RELEASE}-gateway get {verb} -n {NS} -> {want}", got == want, got)
    _, base_url = c.start_gateway(3)
    n = c.args.bulk_tools
    served, _ = wait_for(lambda: http(f"{base_url}/v1/tools/public.bulk_{n - 1}", c.alice_key)[0] == 200, 60, 0.3)
    c.check("a gateway started after the upgrade reads the sharded catalog through the shard rule alone",
            bool(served), c.gateways[-1][0].log_tail(5))
    c.stop_all()
    proc = subprocess.run(base + ["uninstall", RELEASE, "--wait", "--timeout", "120s"], capture_output=True, text=True)
    c.check("helm uninstall", proc.returncode == 0, proc.stderr[-300:])

    def leftovers():
        left = []
        namespaces = [NS, PODS_NS, TENANT_NS, *BULK_NS]
        for ns in namespaces:
            for kind in ("deployments", "replicasets", "pods", "services", "serviceaccounts", "roles",
                         "rolebindings", "networkpolicies", "poddisruptionbudgets", "horizontalpodautoscalers",
                         "leases.coordination.k8s.io", "configmaps", "secrets"):
                for o in c.kube.items(kind, ns):
                    name = o["metadata"]["name"]
                    owners = [r["kind"] for r in o["metadata"].get("ownerReferences", [])]
                    user_made = name in ("kube-root-ca.crt", "default", "ops-api", "ops-settings") \
                        or "UserGrant" in owners
                    if not user_made:
                        left.append(f"{kind}/{ns}/{name}")
        for kind in ("clusterroles", "clusterrolebindings"):
            left += [f"{kind}/{o['metadata']['name']}" for o in c.kube.items(kind)
                     if "mcc" in o["metadata"]["name"]]
        return left
    clean, _ = wait_for(lambda: not leftovers(), 60, 1)
    c.check("nothing of the release is left behind (catalog, shards, Lease and chart objects gone)",
            bool(clean), leftovers()[:12])
    c.check("the CRDs are kept, and the Tools in them",
            c.kube.get("crd", "tools.mcc.dev", check=False) is not None
            and len(c.kube.items("tools.mcc.dev", NS)) > 0)
