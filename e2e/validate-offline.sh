#!/usr/bin/env bash
# Offline checks of the Kubernetes files (no cluster needed); any failure fails the script:
#   1. helm lint --strict of charts/mcc, with the defaults, each charts/mcc/ci/*-values.yaml
#      and the podman e2e's e2e/pod-values.yaml;
#   2. helm template of each, and of NOTES.txt; the output validated strictly against the
#      Kubernetes schemas (kubernetes-validate --strict) for the oldest and newest
#      Kubernetes the chart supports, with manifests/, crds/ and examples/k8s/;
#   3. the pod layout and RBAC the chart promises (e2e/chart_invariants.py), and two
#      releases in one namespace (or one name in two namespaces) not colliding;
#   4. bad values failing the render with their message (schema and chart checks);
#   5. CRDs: the templated ones equal crds/, structural schemas, examples/k8s custom
#      resources valid against them;
#   6. derived files up to date: manifests/, e2e/golden/rbac.yaml, the chart's CRD copy,
#      the README's values table (scripts/chart-sync.sh --check);
#   7. yamllint of the hand-written YAML.
# Tools: HELM (default: helm on PATH, else scripts/ensure-helm.sh), KUBERNETES_VALIDATE,
# PYTHON with yaml and jsonschema, YAMLLINT. A missing tool is reported with SKIP and its
# checks skipped; set REQUIRE_ALL=1 (as .ci/run does) to make a missing tool a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
KV=${KUBERNETES_VALIDATE:-kubernetes-validate}
PY=${PYTHON:-python3}
YAMLLINT=${YAMLLINT:-yamllint}
# The oldest is the chart's kubeVersion (>= 1.30: preStop `sleep`, ValidatingAdmissionPolicy).
K8S_VERSIONS=${K8S_VERSIONS:-"1.30.0 1.37.0"}
CHART=charts/mcc
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failed=0

fail() { echo "FAIL: $*"; failed=1; }
skip() {
  echo "SKIP: $*"
  if [ -n "${REQUIRE_ALL:-}" ]; then failed=1; fi
}
step() { echo "--- $*"; }

HELM=${HELM:-$(command -v helm || scripts/ensure-helm.sh 2>/dev/null || true)}
have_helm=false
if [ -n "$HELM" ] && "$HELM" version --short >/dev/null 2>&1; then have_helm=true; fi
have_py=false
if "$PY" -c 'import yaml, jsonschema' 2>/dev/null; then have_py=true; fi

rendered=()
if $have_helm; then
  step "helm lint --strict and helm template ($("$HELM" version --short))"
  # The podman e2e's values too (e2e/pod-values.yaml): a chart change must not break it.
  for values in "" "$CHART"/ci/*-values.yaml e2e/pod-values.yaml; do
    [ -z "$values" ] || [ -f "$values" ] || continue
    name=$(basename "${values:-chart-defaults}" .yaml); name=${name%-values}
    args=(); [ -n "$values" ] && args=(-f "$values")
    if ! out=$("$HELM" lint --strict "$CHART" "${args[@]}" 2>&1); then
      echo "$out"; fail "helm lint --strict ${values:-(defaults)}"
    fi
    if "$HELM" template mcc "$CHART" --namespace mcc-system "${args[@]}" > "$tmp/$name.yaml" 2> "$tmp/$name.err"; then
      rendered+=("$tmp/$name.yaml")
      echo "rendered ${values:-the chart defaults}: $(grep -c '^kind:' "$tmp/$name.yaml") objects"
    else
      cat "$tmp/$name.err"; fail "helm template ${values:-(defaults)}"
    fi
  done

  # NOTES.txt is not rendered by `helm template`: render a copy as an ordinary template.
  cp -r "$CHART" "$tmp/notes-chart"
  cp "$CHART/templates/NOTES.txt" "$tmp/notes-chart/templates/zz-notes.txt"
  for values in "" "$CHART"/ci/*-values.yaml; do
    args=(); [ -n "$values" ] && args=(-f "$values")
    # Helm exits non-zero here (a .txt is no YAML); --debug prints the text regardless.
    "$HELM" template mcc "$tmp/notes-chart" -n mcc-system "${args[@]}" \
      --show-only templates/zz-notes.txt --debug > "$tmp/notes.txt" 2>/dev/null || true
    grep -q "MCC .* is installed" "$tmp/notes.txt" || fail "NOTES.txt does not render with ${values:-the defaults}"
    grep -q "Search model:" "$tmp/notes.txt" || fail "NOTES.txt (${values:-defaults}) does not say which search model is in use"
  done
  echo "NOTES.txt renders for every values file"

  step "bad values fail the render"
  # Each line: expected message | --set arguments.
  while IFS='|' read -r expect sets; do
    [ -z "$expect" ] && continue
    args=()
    for s in $sets; do args+=(--set "$s"); done
    if out=$("$HELM" template mcc "$CHART" -n mcc-system "${args[@]}" 2>&1); then
      fail "accepted:$sets"
    elif ! grep -qF -- "${expect%"${expect##*[![:space:]]}"}" <<<"$out"; then
      echo "$out" | head -5; fail "rejected, but without '$expect':$sets"
    else
      echo "rejected as expected:$sets"
    fi
  done <<'EOF'
Invalid type. Expected: integer | gateway.replicas=three
Additional property replcas is not allowed | gateway.replcas=3
Additional property enabeld is not allowed | redis.enabeld=true
up to 2 replicas without Redis | gateway.replicas=2 redis.enabled=false
up to 6 replicas without Redis | gateway.replicas=1 gateway.autoscaling.enabled=true redis.enabled=false
must be one of the following | gateway.catalog.source=configmap
must be one of the following | redis.enabled=maybe
an upstream must never receive such a token | upstreams.tokenAudiences[0].audience=mcc-gateway
an upstream must never receive such a token | upstreams.tokenAudiences[0].audience=https://kubernetes.default.svc.cluster.local
Must be greater than or equal to 600 | upstreams.tokenAudiences[0].audience=a.example upstreams.tokenAudiences[0].expirationSeconds=60
Does not match pattern | redis.url=http://redis:6379
set redis.url or redis.existingSecret, not both | redis.url=redis://r:6379 redis.existingSecret=s
set redis.external or redis.url / redis.existingSecret, not both | redis.external.mode=single redis.external.addresses={r:6379} redis.url=redis://r:6379
must be one of the following | redis.external.mode=proxy
Array must have at least 1 items | redis.external.mode=cluster
String length must be greater than or equal to 1 | redis.external.mode=sentinel redis.external.addresses={s:26379}
Does not match pattern | redis.external.mode=single redis.external.addresses={redis}
needs redis.external.tls=true | redis.external.mode=single redis.external.addresses={r:6379} redis.external.caSecret=ca
must be one of the following | redis.maxmemoryPolicy=evict-sometimes
gateway.search.model is volume | gateway.search.model=volume
gateway.catalog.source is files | gateway.catalog.source=files
name the namespaces pod Tools may run in | podRuntime.enabled=true
podRuntime.enabled is false | podRuntime.clusterWide=true
Additional property namespaces is not allowed | gateway.rbac.referencedObjects.namespaces={a}
Does not match pattern | podRuntime.enabled=true podRuntime.namespaceSelector=tenant
defaultTimeoutSecs (600) is above maxTimeoutSecs | gateway.execution.defaultTimeoutSecs=600
Invalid type. Expected: boolean | networkPolicy.enabled=yes
needs gateway.auth.backend=jwt | gateway.auth.oauth.resource=https://mcc.example.com/mcp
gateway.auth.jwt.issuer: required | gateway.auth.backend=jwt gateway.auth.jwt.jwksUrl=https://idp.example.com/certs
Does not match pattern | gateway.auth.backend=jwt gateway.auth.oauth.resource=mcc.example.com/mcp
Additional property resorce is not allowed | gateway.auth.oauth.resorce=x
Does not match pattern | gateway.otel.endpoint=otel-collector:4318
must be one of the following | gateway.otel.sampler=sometimes
is not in operator.watchNamespaces | operator.watchNamespaces={team-a}
not both | operator.watchNamespaces={mcc-system} operator.watchNamespaceSelector=a=b
Invalid type. Expected: boolean | gateway.metricsTokenSecret.required=no
Additional property requird is not allowed | gateway.metricsTokenSecret.requird=false
Does not match pattern | networkPolicy.podRuntime.blockedCidrs={10.0.0.0}
Must be greater than or equal to 1 | networkPolicy.dns.ports={0}
Additional property namespace is not allowed | networkPolicy.podRuntime.namespace=a
EOF

  step "release-scoped names"
  "$HELM" template a "$CHART" -n shared --set fullnameOverride= > "$tmp/rel-a.yaml"
  "$HELM" template b "$CHART" -n shared --set crds.enabled=false > "$tmp/rel-b.yaml"
  "$HELM" template a "$CHART" -n other --set crds.enabled=false > "$tmp/rel-a-other.yaml"
  if $have_py && ! "$PY" - "$tmp/rel-a.yaml" "$tmp/rel-b.yaml" "$tmp/rel-a-other.yaml" <<'PY'; then
import sys, yaml
seen, bad = {}, []
for path in sys.argv[1:]:
    for d in yaml.safe_load_all(open(path)):
        if not d:
            continue
        key = (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
        if key in seen and seen[key] != path:
            bad.append(f"{key} in {seen[key]} and {path}")
        seen[key] = path
for b in bad:
    print("collision:", b)
print("two releases in one namespace, one release name in two namespaces:", "FAIL" if bad else "no collisions")
sys.exit(1 if bad else 0)
PY
    fail "names collide between releases"
  fi
else
  skip "helm: not installed and scripts/ensure-helm.sh could not fetch it (set HELM)"
fi

step "kubernetes-validate --strict"
if command -v "$KV" >/dev/null; then
  files=(manifests/*.yaml crds/*.yaml examples/k8s/namespace.yaml examples/k8s/support.yaml "${rendered[@]}")
  for v in $K8S_VERSIONS; do
    # Custom resources of other projects (ServiceMonitor) have no schema here: a warning.
    if out=$("$KV" --strict --quiet -k "$v" "${files[@]}" 2>&1); then
      echo "$out" | grep -v "Couldn't find schema for kind ServiceMonitor" || true
      echo "valid against Kubernetes $v: ${#files[@]} files"
    else
      echo "$out" | grep -v "Couldn't find schema for kind ServiceMonitor"
      fail "kubernetes-validate --strict -k $v"
    fi
  done
else
  skip "kubernetes-validate: not installed (pip install kubernetes-validate)"
fi

if $have_py; then
  if [ ${#rendered[@]} -gt 0 ]; then
    step "pod layout, RBAC and NetworkPolicy invariants"
    "$PY" e2e/chart_invariants.py "${rendered[@]}" || fail "chart invariants"
  fi

  step "CRDs"
  "$PY" - "$tmp/chart-defaults.yaml" <<'PY' || fail "CRDs"
# The templated CRDs equal crds/ (but for the labels and the keep annotation); the chart's
# copy equals crds/; the API server's structural-schema rules (the ones a generator can
# break): every node typed unless it preserves unknown fields or is int-or-string; no
# type, description, default or nullable inside anyOf/oneOf/allOf/not; CEL rules only on
# typed nodes.
import glob, os, sys, yaml
problems = []
for f in sorted(glob.glob("crds/*.yaml")):
    for other in (f"charts/mcc/crds/{os.path.basename(f)}", f"charts/mcc/files/crds/{os.path.basename(f)}"):
        if not os.path.exists(other) or open(other).read() != open(f).read():
            problems.append(f"{other} differs from {f}")
if os.path.exists(sys.argv[1]):
    templated = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1]))
                 if d and d["kind"] == "CustomResourceDefinition"}
    for f in sorted(glob.glob("crds/*.yaml")):
        want = yaml.safe_load(open(f))
        got = templated.get(want["metadata"]["name"])
        if got is None:
            problems.append(f"the chart does not template {want['metadata']['name']}")
            continue
        if got["metadata"].get("annotations", {}).get("helm.sh/resource-policy") != "keep":
            problems.append(f"templated {f}: no helm.sh/resource-policy: keep")
        got = dict(got, metadata={"name": got["metadata"]["name"]})
        want = dict(want, metadata={"name": want["metadata"]["name"]})
        if got != want:
            problems.append(f"templated {want['metadata']['name']} differs from {f}")
def walk(node, path, in_junctor=False):
    if not isinstance(node, dict):
        return
    if in_junctor:
        for k in ("type", "description", "default", "nullable"):
            if k in node:
                problems.append(f"{path}: '{k}' inside anyOf/oneOf/allOf/not")
    elif "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields") \
            and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: no type")
    if "x-kubernetes-validations" in node and "type" not in node \
            and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: CEL rules on an untyped node")
    for k, v in (node.get("properties") or {}).items():
        walk(v, f"{path}.{k}", in_junctor)
    if isinstance(node.get("items"), dict):
        walk(node["items"], f"{path}[]", in_junctor)
    if isinstance(node.get("additionalProperties"), dict):
        walk(node["additionalProperties"], f"{path}{{}}", in_junctor)
    for j in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(node.get(j) or []):
            walk(sub, f"{path}/{j}[{i}]", True)
    if isinstance(node.get("not"), dict):
        walk(node["not"], f"{path}/not", True)
for f in sorted(glob.glob("crds/*.yaml")):
    crd = yaml.safe_load(open(f))
    for v in crd["spec"]["versions"]:
        walk(v["schema"]["openAPIV3Schema"], f"{f}:{v['name']}")
for p in problems:
    print("problem:", p)
print("CRDs (copies, templated, structural):", "FAIL" if problems else "ok")
sys.exit(1 if problems else 0)
PY

  step "examples/k8s custom resources against the CRD schemas"
  "$PY" - <<'PY' || fail "examples/k8s custom resources"
import glob, sys, jsonschema, yaml
schemas = {}
for f in glob.glob("crds/*.yaml"):
    crd = yaml.safe_load(open(f))
    for v in crd["spec"]["versions"]:
        schemas[(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
failed = False
for f in sorted(glob.glob("examples/k8s/*.yaml")):
    for doc in yaml.safe_load_all(open(f)):
        if not doc or "/" not in doc.get("apiVersion", "") or not doc["apiVersion"].startswith("mcc.dev/"):
            continue
        schema = schemas.get((doc["apiVersion"], doc["kind"]))
        if schema is None:
            failed = True
            print(f"{f}: {doc['kind']} {doc['metadata']['name']}: no CRD serves {doc['apiVersion']}")
            continue
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(doc))
        for e in errors:
            failed = True
            print(f"{f}: {doc['kind']} {doc['metadata']['name']}: {'/'.join(map(str, e.path))}: {e.message}")
        if not errors:
            print(f"{f}: {doc['kind']} {doc['metadata']['name']}: valid")
sys.exit(1 if failed else 0)
PY
else
  skip "$PY lacks yaml or jsonschema (pip install pyyaml jsonschema)"
fi

step "derived files up to date"
if $have_helm && $have_py; then
  HELM="$HELM" scripts/chart-sync.sh --check || fail "derived files are stale (run scripts/chart-sync.sh)"
else
  skip "derived files: needs helm and python3 with yaml"
fi

step "yamllint"
if command -v "$YAMLLINT" >/dev/null; then
  if "$YAMLLINT" -s -d '{extends: relaxed, rules: {line-length: {max: 120}, indentation: {indent-sequences: whatever}}}' \
      "$CHART/values.yaml" "$CHART/ci/" "$CHART/Chart.yaml" examples/k8s/ e2e/golden/ .github/workflows/; then
    echo "yamllint: ok"
  else
    fail "yamllint"
  fi
else
  skip "yamllint: not installed (pip install yamllint)"
fi

if [ $failed -ne 0 ]; then
  echo "offline validation FAILED"
  exit 1
fi
echo "offline validation passed"
