#!/usr/bin/env bash
# The cluster e2e in one command: a local control plane (up.sh), the chart installed into
# it with `helm install`, then e2e.py (the operator and the gateway as host processes
# with the chart's ServiceAccounts, checked with kubectl and the official MCP Python SDK),
# then down.sh. See e2e/README.md, "The cluster e2e".
#
#   e2e/cluster/run.sh         # --keep: leave the control plane running (down.sh stops it)
#
# Needs: Go and the Go module proxy the first time (build.sh, ~20 min, cached), openssl,
# helm (PATH or scripts/ensure-helm.sh), a Redis (REDIS_URL, default
# redis://127.0.0.1:6379), the debug binaries of mcc-operator, mcc-gateway and
# mcc-executor (built here; a no-op after `cargo test`), Python with `mcp` >= 2.3 and
# pyyaml (a venv in ~/.cache/mcc-k8s/venv otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
. e2e/lib.sh
keep=false
[ "${1:-}" = "--keep" ] && keep=true
export MCC_CLUSTER_DIR=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
start=$(date +%s)

e2e_helm
e2e_python "$HOME/.cache/mcc-k8s"
target=${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}
[ -n "${MCC_E2E_NO_BUILD:-}" ] || CARGO_TARGET_DIR=$target cargo build -q --locked -p mcc-operator -p mcc-gateway -p mcc-executor --bins

eval "$(e2e/cluster/up.sh)"
$keep || trap 'e2e/cluster/down.sh' EXIT
echo "cluster e2e: control plane up after $(( $(date +%s) - start )) s"

# Namespaces the chart's Roles go into (scope: namespaces) exist before the install; the
# pod runtime's enforces the restricted Pod Security Standard.
for ns in mcc-system mcc-e2e-pods mcc-e2e-tenant mcc-e2e-upstream mcc-e2e-bulk-0 mcc-e2e-bulk-1 mcc-e2e-bulk-2; do
  kubectl create namespace "$ns" >/dev/null
done
kubectl label namespace mcc-e2e-pods pod-security.kubernetes.io/enforce=restricted >/dev/null

redis_url=${REDIS_URL:-redis://127.0.0.1:6379}
"$HELM" --kubeconfig "$KUBECONFIG" install mcc charts/mcc -n mcc-system \
  -f e2e/cluster/values.yaml --set redis.url="$redis_url" >/dev/null
echo "cluster e2e: chart installed after $(( $(date +%s) - start )) s"

work=$MCC_CLUSTER_DIR/e2e
mkdir -p "$work"
rc=0
"$python" e2e/cluster/e2e.py --kubeconfig "$KUBECONFIG" --bin "$target/debug" --workdir "$work" \
  --redis-url "$redis_url" --helm "$HELM" --values e2e/cluster/values.yaml \
  --port-base "${MCC_E2E_PORT_BASE:-18700}" || rc=$?

# e2e/k8s.sh on the same control plane, on a clean slate (its operator runs here too: no
# node runs the operator's Deployment; its pod-runtime part needs nodes, issue 31).
kubectl delete namespace mcc-system agents mcc-e2e-pods mcc-e2e-tenant mcc-e2e-upstream mcc-e2e-bulk-0 mcc-e2e-bulk-1 \
  mcc-e2e-bulk-2 --wait --timeout=180s >/dev/null
if MCC_E2E_OPERATOR=local MCC_E2E_SKIP_PODS=1 CARGO_TARGET_DIR=$target TIMEOUT=60 e2e/k8s.sh > "$work/k8s.sh.log" 2>&1; then
  echo "ok: e2e/k8s.sh against the control plane (operator and gateway run here; pods skipped)"
else
  echo "FAIL: e2e/k8s.sh against the control plane -- tail of $work/k8s.sh.log:"; tail -15 "$work/k8s.sh.log"
  rc=1
fi
if [ $rc -ne 0 ] && ! $keep; then
  # The state directory goes with down.sh: show what CI cannot look at afterwards.
  for log in "$work"/*.log "$MCC_CLUSTER_DIR"/logs/*.log; do
    [ -f "$log" ] || continue
    echo "--- tail of $log"; tail -n 25 "$log" | cut -c1-400
  done
fi
echo "cluster e2e: $(( $(date +%s) - start )) s in all (logs: $work; kept with --keep)"
exit $rc
