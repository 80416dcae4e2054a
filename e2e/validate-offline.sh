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
