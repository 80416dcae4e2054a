#!/usr/bin/env python3
"""What the chart promises about every install, checked on rendered output.

    python3 e2e/chart_invariants.py RENDERED.yaml...   (helm template output, one per values file)

The gateway pod layout of issue 9/10 (two containers, token only in the gateway container,
nothing of the gateway's environment in the executor, the socket emptyDir, different
uids, the executor serving the gateway's uid alone, probes, grace period), the gateway
serving by default (0.0.0.0, Host allow-list of the Service's names), Redis whenever more than one replica may run, least-privilege RBAC
(no list/watch on Secrets, the catalog ConfigMap by name, Pods and Secret creation only with
the pod runtime,
usergrants/finalizers for the operator), NetworkPolicies that keep the link-local ranges
and cloud metadata out of reach, send DNS only to the cluster DNS and cover the Pods of
pod Tools in each pod-runtime namespace, and a /metrics token (issue 32: tools share
the gateway pod's loopback) held by the gateway container alone. Prints one line per
file and exits 1 listing every broken promise.
"""
import sys
from pathlib import Path

import yaml

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# Never reachable through an allow-all egress rule: link-local (IPv4 holds the metadata
# services of most clouds) and the metadata addresses outside it.
METADATA = {"169.254.0.0/16", "100.100.100.200/32", "fe80::/10", "fd00:ec2::254/128", "fd20:ce::254/128"}
# The labels the gateway gives the Pods of pod Tools (gateway/src/kube/pods/spec.rs).
POD_TOOL_MANAGED_BY = "mcc-gateway"


def component(obj):
    return (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/component")


def env_map(container):
    return {e["name"]: e for e in container.get("env") or []}


def mounts(container):
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}


def check_gateway(dep, objs, problems, name):
    spec = dep["spec"]["template"]["spec"]
    say = lambda msg: problems.append(f"{name}: gateway Deployment {dep['metadata']['name']}: {msg}")
    containers = {c["name"]: c for c in spec["containers"]}
    if set(containers) != {"gateway", "executor"}:
        say(f"containers are {sorted(containers)}, not gateway + executor")
        return
    gw, ex = containers["gateway"], containers["executor"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    if spec.get("automountServiceAccountToken") is not False:
        say("the pod automounts a ServiceAccount token")
    if spec.get("shareProcessNamespace"):
        say("shareProcessNamespace is on: tools could see the gateway's processes")
    if TOKEN_PATH not in mounts(gw):
        say("the gateway container has no token mount")
    if TOKEN_PATH in mounts(ex) or any(v == mounts(gw).get(TOKEN_PATH) for v in mounts(ex).values()):
        say("the executor container mounts the token volume")
    token_volume = volumes.get(mounts(gw).get(TOKEN_PATH), {})
    if "projected" in token_volume:
        sources = token_volume["projected"]["sources"]
        if not any("serviceAccountToken" in s for s in sources):
            say("the projected token volume has no serviceAccountToken source")
    for c in (gw, ex):
        sc = c.get("securityContext") or {}
        if not sc.get("readOnlyRootFilesystem"):
            say(f"{c['name']}: root filesystem is writable")
        if sc.get("allowPrivilegeEscalation") is not False:
            say(f"{c['name']}: privilege escalation allowed")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            say(f"{c['name']}: capabilities not dropped")
        if mounts(c).get("/tmp") is None or "emptyDir" not in volumes.get(mounts(c)["/tmp"], {}):
            say(f"{c['name']}: /tmp is not an emptyDir")
        if c.get("envFrom"):
            say(f"{c['name']}: envFrom (environment should be explicit)")
    gw_uid = (gw.get("securityContext") or {}).get("runAsUser")
    ex_uid = (ex.get("securityContext") or {}).get("runAsUser")
    if gw_uid is None or ex_uid is None or gw_uid == ex_uid:
        say(f"gateway uid {gw_uid} and executor uid {ex_uid} must both be set and differ")
    # The executor serves the gateway's uid alone: not its own, which tools run as.
    ex_args = ex.get("args") or []
    allowed = [ex_args[i + 1] for i, a in enumerate(ex_args[:-1]) if a == "--allow-uid"]
    if allowed != [str(gw_uid)]:
        say(f"the executor's --allow-uid is {allowed}, not the gateway's uid [{gw_uid}]")
    # No writable volume is shared between the two containers: a tool could plant files
    # (or a fake socket) where the gateway looks.
    shared = set(mounts(gw).values()) & set(mounts(ex).values())
    for name in shared:
        mounted = [m for c in (gw, ex) for m in c.get("volumeMounts", []) if m["name"] == name]
        if not all(m.get("readOnly") for m in mounted) and "configMap" not in volumes.get(name, {}):
            say(f"volume {name} is shared writable by the gateway and the executor")

    env = env_map(gw)
    value = lambda k: (env.get(k) or {}).get("value")
    if value("MCC_SERVER__HOST") != "0.0.0.0":
        say("MCC_SERVER__HOST is not 0.0.0.0: the Service could not reach it")
    if value("MCC_EXECUTION__RUNTIME") != "executor":
        say("MCC_EXECUTION__RUNTIME is not executor")
    socket = value("MCC_EXECUTION__EXECUTOR_SOCKET")
    if not socket or not socket.startswith("@"):
        say(f"MCC_EXECUTION__EXECUTOR_SOCKET is {socket!r}, not an abstract @name")
    if ex.get("args", [])[-1:] != [socket]:
        say(f"the executor does not serve on {socket}")
    # A stopping pod: both containers wait the same preStop delay (the executor must not
    # stop before the gateway it serves), then running calls get the longest timeout.
    delays = [((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {}).get("seconds", 0)
              for c in (gw, ex)]
    if delays[0] != delays[1]:
        say(f"the gateway and executor preStop delays differ ({delays})")
    try:
        grace = int(value("MCC_EXECUTION__MAX_TIMEOUT_SECS")) + delays[0] + 5
        if spec.get("terminationGracePeriodSeconds") != grace:
            say(f"terminationGracePeriodSeconds is not preStop delay + max timeout + 5 ({grace})")
    except (TypeError, ValueError):
        say("MCC_EXECUTION__MAX_TIMEOUT_SECS is missing")
    ns = dep["metadata"]["namespace"]
    services = [o for o in objs if o["kind"] == "Service" and component(o) == "gateway"]
    hosts = set((value("MCC_SERVER__ALLOWED_HOSTS") or "").split(";"))
    for svc in services:
        n, port = svc["metadata"]["name"], svc["spec"]["ports"][0]["port"]
        for h in (n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"):
            if h not in hosts or f"{h}:{port}" not in hosts:
                say(f"allowed hosts lack {h} or {h}:{port}")
    for ing in (o for o in objs if o["kind"] == "Ingress"):
        for rule in ing["spec"]["rules"]:
            if rule["host"] not in hosts:
                say(f"allowed hosts lack the Ingress host {rule['host']}")

    # Nothing of the gateway's configuration reaches the executor (tools' environment).
    for e in ex.get("env") or []:
        if e["name"].startswith("MCC_") or e["name"] in ("REDIS_URL", "REDIS_PASSWORD"):
            say(f"the executor gets the gateway setting {e['name']}")
        if "secretKeyRef" in (e.get("valueFrom") or {}) and e["name"] in env:
            say(f"the executor shares the gateway's secret variable {e['name']}")
    # Redis: the password only in the gateway container, defined before the URL using it.
    names = [e["name"] for e in gw.get("env") or []]
    url = value("REDIS_URL") or ""
    if "$(REDIS_PASSWORD)" in url and (
            "REDIS_PASSWORD" not in names or names.index("REDIS_PASSWORD") > names.index("REDIS_URL")):
        say("REDIS_URL uses $(REDIS_PASSWORD) before it is defined")
    replicas = dep["spec"].get("replicas")
    hpa = any(o["kind"] == "HorizontalPodAutoscaler" for o in objs)
    if (hpa or (replicas or 1) > 1) and "REDIS_URL" not in env:
        say(f"{'an HPA' if hpa else f'{replicas} replicas'} without REDIS_URL")

    probes = (gw.get("readinessProbe") or {}).get("httpGet", {}).get("path"), \
        (gw.get("livenessProbe") or {}).get("httpGet", {}).get("path")
    if probes != ("/readyz", "/healthz") or not gw.get("startupProbe"):
        say(f"gateway probes are {probes}, startup {bool(gw.get('startupProbe'))}")
    if "probe" not in ((ex.get("readinessProbe") or {}).get("exec") or {}).get("command", []):
        say("the executor has no `mcc-executor probe` readiness probe")

    # /metrics: tools reach it over the pod's loopback, so it needs a token (every values
    # file here keeps gateway.metricsTokenSecret.required), from a Secret, in the gateway
    # container only.
    token = env.get("MCC_METRICS__TOKEN")
    if token is None:
        say("no MCC_METRICS__TOKEN: local tools can read /metrics over the pod's loopback")
    else:
        ref = (token.get("valueFrom") or {}).get("secretKeyRef")
        if not ref:
            say("MCC_METRICS__TOKEN is not read from a Secret")
        for mon in (o for o in objs if o["kind"] == "ServiceMonitor" and component(o) == "gateway"):
            sent = [e.get("bearerTokenSecret") for e in mon["spec"]["endpoints"]]
            if sent != [ref] * len(sent):
                say(f"ServiceMonitor {mon['metadata']['name']} sends {sent}, not the token {ref}")
    if any(e["name"] == "MCC_METRICS__TOKEN" for e in ex.get("env") or []):
        say("the executor gets MCC_METRICS__TOKEN")

    if value("MCC_CATALOG__SOURCE") == "files":
        path = value("MCC_TOOL_FILES")
        if not path or mounts(gw).get(path) is None or mounts(gw).get(path) != mounts(ex).get(path):
            say("tool files are not mounted at MCC_TOOL_FILES in both containers")


def rules_of(objs, sa_name, sa_ns):
    """Every rule bound to one ServiceAccount, with the binding's scope."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out = []
    for b in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa_name and s.get("namespace") == sa_ns
                   for s in b["subjects"]):
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], ns, ref["name"]))
        for rule in (role or {}).get("rules") or []:
            out.append((b["kind"], b["metadata"].get("namespace", "*"), rule))
    return out


def check_rbac(objs, problems, name):
    for dep in (o for o in objs if o["kind"] == "Deployment"):
        sa = dep["spec"]["template"]["spec"].get("serviceAccountName")
        ns = dep["metadata"]["namespace"]
        rules = rules_of(objs, sa, ns)
        say = lambda msg: problems.append(f"{name}: {component(dep)} ServiceAccount {sa}: {msg}")
        for _, scope, rule in rules:
            if "*" in rule.get("verbs", []) or "*" in rule.get("resources", []) or "*" in rule.get("apiGroups", []):
                say(f"wildcard rule {rule}")
        if component(dep) == "gateway":
            for kind, scope, rule in rules:
                res, verbs = set(rule.get("resources", [])), set(rule.get("verbs", []))
                # The pod runtime creates (and deletes) each call's input Secret; nothing
                # ever lists, watches or rewrites Secrets.
                if "secrets" in res and verbs & {"list", "watch", "update", "patch"}:
                    say(f"may {sorted(verbs)} Secrets ({kind} in {scope})")
                if "secrets" in res and verbs & {"create", "delete"} and "pod-runtime" not in name:
                    say(f"may create/delete Secrets without podRuntime.enabled ({kind} in {scope})")
                if "configmaps" in res and verbs & {"list", "watch"} and not rule.get("resourceNames"):
                    say("may list/watch ConfigMaps beyond the catalog's")
                if res & {"pods", "pods/log"} and "pod-runtime" not in name:
                    say("has Pod verbs without podRuntime.enabled")
            if "pod-runtime" in name and not any("pods" in r.get("resources", []) for _, _, r in rules):
                say("podRuntime.enabled but no Pod verbs")
            if "pod-runtime" in name and not any(
                "secrets" in r.get("resources", []) and "create" in r.get("verbs", []) for _, _, r in rules
            ):
                say("podRuntime.enabled but no create on Secrets (the per-call input)")
        if component(dep) == "operator":
            for kind, scope, rule in rules:
                if "secrets" in rule.get("resources", []) and kind == "ClusterRoleBinding":
                    say("has Secret verbs cluster-wide (API keys live in the trusted namespaces only)")
            if not any("usergrants/finalizers" in r.get("resources", []) and "update" in r.get("verbs", [])
                       for _, _, r in rules):
                say("lacks update on usergrants/finalizers")


def check_network(objs, problems, name):
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    for np in policies:
        say = lambda msg: problems.append(
            f"{name}: NetworkPolicy {np['metadata']['namespace']}/{np['metadata']['name']}: {msg}")
        for rule in np["spec"].get("egress") or []:
            for peer in rule.get("to") or []:
                block = peer.get("ipBlock")
                if block and block["cidr"] in ("0.0.0.0/0", "::/0"):
                    kept = set(block.get("except") or [])
                    wanted = {c for c in METADATA if (":" in c) == (":" in block["cidr"])}
                    if not wanted <= kept:
                        say(f"{block['cidr']} without excepting {sorted(wanted - kept)}")
            # DNS goes to the cluster DNS only: a port-53 rule without `to` is a channel
            # to any host on that port.
            if any(p.get("port") == 53 for p in rule.get("ports") or []) and not rule.get("to"):
                say("DNS (port 53) to any address")
    # The Pods of pod Tools: one policy in each namespace the gateway may create them in.
    gateways = [o for o in objs if o["kind"] == "Deployment" and component(o) == "gateway"]
    for dep in gateways:
        env = {e["name"]: e.get("value") for c in dep["spec"]["template"]["spec"]["containers"]
               for e in c.get("env") or []}
        if env.get("MCC_EXECUTION__POD__ENABLED") != "true" or not policies:
            continue
        instance = env.get("MCC_EXECUTION__POD__INSTANCE")
        namespaces = [n for n in (env.get("MCC_EXECUTION__POD__NAMESPACES") or "").split(";") if n]
        if not namespaces:
            continue  # scope cluster: the chart cannot know them (NOTES.txt says so)
        for ns in namespaces:
            mine = [np for np in policies if np["metadata"]["namespace"] == ns
                    and np["spec"]["podSelector"].get("matchLabels") == {
                        "app.kubernetes.io/managed-by": POD_TOOL_MANAGED_BY,
                        "app.kubernetes.io/instance": instance}]
            if len(mine) != 1:
                problems.append(f"{name}: {len(mine)} NetworkPolicies select the pod Tools of {instance} in {ns}")
                continue
            spec = mine[0]["spec"]
            if set(spec.get("policyTypes") or []) != {"Ingress", "Egress"} or spec.get("ingress"):
                problems.append(f"{name}: the pod-Tool NetworkPolicy in {ns} does not deny all ingress")


def main(paths):
    problems = []
    for path in paths:
        name = Path(path).name
        objs = [d for d in yaml.safe_load_all(open(path)) if d]
        gateways = [o for o in objs if o["kind"] == "Deployment" and component(o) == "gateway"]
        for dep in gateways:
            check_gateway(dep, objs, problems, name)
        check_rbac(objs, problems, name)
        check_network(objs, problems, name)
        print(f"{name}: {len(objs)} objects, {len(gateways)} gateway Deployment(s) checked")
    for p in problems:
        print("broken:", p)
    print("chart invariants:", "FAIL" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
