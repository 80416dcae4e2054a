#!/usr/bin/env bash
# Offline checks of the Kubernetes files (no cluster needed):
#   helm lint --strict + helm template of charts/mcc,
#   kubernetes-validate --strict of manifests/, crds/, the rendered chart, examples/k8s,
#   examples/k8s custom resources against the CRDs' openAPIV3Schema (python jsonschema).
# Tools: HELM (default `helm`), KUBERNETES_VALIDATE (default `kubernetes-validate`),
# PYTHON with jsonschema and yaml (default `python3`). A missing tool is reported and its
# check skipped; any failing check fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM=${HELM:-helm}
KV=${KUBERNETES_VALIDATE:-kubernetes-validate}
PY=${PYTHON:-python3}
K8S_VERSION=${K8S_VERSION:-1.33.0}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if command -v "$HELM" >/dev/null; then
  "$HELM" lint --strict charts/mcc
  "$HELM" template mcc charts/mcc -n mcc-system > "$tmp/chart.yaml"
else
  echo "SKIP helm: not installed (set HELM)"
fi

if command -v "$KV" >/dev/null; then
  files=(manifests/*.yaml crds/*.yaml examples/k8s/namespace.yaml examples/k8s/support.yaml)
  [ -f "$tmp/chart.yaml" ] && files+=("$tmp/chart.yaml")
  "$KV" --strict -k "$K8S_VERSION" "${files[@]}"
else
  echo "SKIP kubernetes-validate: not installed (set KUBERNETES_VALIDATE)"
fi

if "$PY" -c 'import yaml' 2>/dev/null; then
  # The API server's structural-schema rules (the ones a generator can break): every
  # node typed unless it preserves unknown fields or is int-or-string; no type,
  # description, default or nullable inside anyOf/oneOf/allOf/not; CEL rules only on
  # typed nodes (the API server cannot compile them on untyped ones).
  "$PY" - <<'PY'
import glob, sys, yaml
problems = []
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
    print("not structural:", p)
print("structural schemas:", "FAIL" if problems else "ok")
sys.exit(1 if problems else 0)
PY
else
  echo "SKIP structural check: $PY lacks yaml"
fi

if "$PY" -c 'import jsonschema, yaml' 2>/dev/null; then
  "$PY" - <<'PY'
import glob, sys, jsonschema, yaml
schemas = {}
for f in glob.glob("crds/*.yaml"):
    crd = yaml.safe_load(open(f))
    schemas[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
failed = False
for f in sorted(glob.glob("examples/k8s/*.yaml")):
    for doc in yaml.safe_load_all(open(f)):
        if doc and doc.get("kind") in schemas:
            errors = list(jsonschema.Draft7Validator(schemas[doc["kind"]]).iter_errors(doc))
            for e in errors:
                failed = True
                print(f"{f}: {doc['kind']} {doc['metadata']['name']}: {'/'.join(map(str, e.path))}: {e.message}")
            if not errors:
                print(f"{f}: {doc['kind']} {doc['metadata']['name']}: valid")
sys.exit(1 if failed else 0)
PY
else
  echo "SKIP schema check of examples: $PY lacks jsonschema or yaml"
fi
echo "offline validation passed"
