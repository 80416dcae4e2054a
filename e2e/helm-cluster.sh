#!/usr/bin/env bash
# The Helm chart on a real cluster, end to end (run by .github/workflows/kind-e2e.yaml on
# kind; works on any cluster that has the images):
#   helm install --wait (pod runtime on); examples/k8s Ready, pod Tools included; RBAC as promised (kubectl auth can-i, the
#   aggregated roles); MCP calls from inside the cluster through the Service: 401 without a
#   credential, a ServiceAccount token for audience mcc-gateway, an API key, a namespace
#   the NetworkPolicy refuses; the operator leader killed; helm upgrade; helm uninstall.
#
#   IMAGE_PREFIX=localhost/mcc- IMAGE_TAG=ci e2e/helm-cluster.sh
#
# Settings: RELEASE (mcc), NS (mcc-system), IMAGE_PREFIX (ghcr.io/mcc-k8s/mcc-), IMAGE_TAG
# (chart defaults when unset), PULL_POLICY (IfNotPresent), TIMEOUT seconds (240),
# HELM_EXTRA_ARGS (more `helm install` arguments). Skips (exit 0) without a cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASE=${RELEASE:-mcc}
NS=${NS:-mcc-system}
IMAGE_PREFIX=${IMAGE_PREFIX:-ghcr.io/mcc-k8s/mcc-}
PULL_POLICY=${PULL_POLICY:-IfNotPresent}
TIMEOUT=${TIMEOUT:-240}
case $RELEASE in *mcc*) FULL=$RELEASE ;; *) FULL=$RELEASE-mcc ;; esac
GW=$FULL-gateway
URL=http://$GW.$NS.svc/mcp
GW_SA=system:serviceaccount:$NS:$GW
OP_SA=system:serviceaccount:$NS:$FULL-operator

if ! kubectl version --request-timeout=5s >/dev/null 2>&1; then
  echo "SKIP: no Kubernetes API server is reachable with the current kubeconfig"; exit 0
fi

step() { echo; echo "=== $*"; }
dump() {
  echo "--- diagnostics" >&2
  kubectl get pods -A -o wide >&2 || true
  kubectl -n "$NS" get events --sort-by=.lastTimestamp >&2 | tail -40 || true
  for pod in $(kubectl -n "$NS" get pods -o name 2>/dev/null); do
    kubectl -n "$NS" describe "$pod" >&2 | tail -25 || true
    kubectl -n "$NS" logs "$pod" --all-containers --tail=60 >&2 || true
  done
  kubectl -n "$NS" get tools.mcc.dev,usergrants.mcc.dev -o wide >&2 || true
}
fail() { echo "FAIL: $*" >&2; dump; exit 1; }
# Polls a command until it succeeds (TIMEOUT seconds).
until_ok() {
  local what=$1; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out: $what"
    sleep 2
  done
  echo "ok: $what"
}
can() { # can yes|no <kubectl auth can-i arguments>
  local want=$1; shift
  local got
  got=$(kubectl auth can-i "$@" 2>/dev/null || true)
  [ "$got" = "$want" ] || fail "kubectl auth can-i $*: $got, expected $want"
  echo "ok: can-i $* -> $got"
}

# Runs e2e/mcp_http_check.py in a pod of namespace $1 as ServiceAccount $2 (with a token
# for audience mcc-gateway at /var/run/mcc/token and MCC_KEY from Secret mcp-check-key when
# it exists); the remaining arguments go to the script.
mcp_check() {
  local ns=$1 sa=$2; shift 2
  local pod
  pod=mcp-check-$(date +%s%N | tail -c 7)
  kubectl -n "$ns" create configmap mcp-check --from-file=e2e/mcp_http_check.py \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  python3 - "$pod" "$ns" "$sa" "${IMAGE_PREFIX}executor:${IMAGE_TAG:-$APP_VERSION}" "$@" <<'PY' | kubectl apply -f - >/dev/null
import json, sys
pod, ns, sa, image, *args = sys.argv[1:]
print(json.dumps({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": pod, "namespace": ns, "labels": {"app": "mcp-check"}},
  "spec": {
    "restartPolicy": "Never", "serviceAccountName": sa, "automountServiceAccountToken": False,
    "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{
      "name": "check", "image": image, "imagePullPolicy": "IfNotPresent",
      "command": ["python3", "/check/mcp_http_check.py", *args],
      "env": [{"name": "MCC_KEY", "valueFrom": {"secretKeyRef": {"name": "mcp-check-key", "key": "key", "optional": True}}}],
      "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                          "capabilities": {"drop": ["ALL"]}},
      "volumeMounts": [{"name": "check", "mountPath": "/check"}, {"name": "token", "mountPath": "/var/run/mcc"}],
    }],
    "volumes": [
      {"name": "check", "configMap": {"name": "mcp-check"}},
      {"name": "token", "projected": {"sources": [{"serviceAccountToken": {
          "audience": "mcc-gateway", "path": "token", "expirationSeconds": 3600}}]}},
    ],
  },
}))
PY
  local deadline=$((SECONDS + TIMEOUT)) phase=""
  while :; do
    phase=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    case $phase in Succeeded|Failed) break ;; esac
    [ $SECONDS -lt $deadline ] || { kubectl -n "$ns" describe pod "$pod" >&2; fail "client pod $ns/$pod did not finish"; }
    sleep 2
  done
  kubectl -n "$ns" logs "$pod"
  kubectl -n "$ns" delete pod "$pod" --wait=false >/dev/null
  [ "$phase" = Succeeded ] || fail "MCP checks from $ns as $sa: $*"
}

APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/mcc/Chart.yaml)
values=()
for c in gateway gateway.executor operator redis; do
  name=${c##*.}
  values+=(--set "$c.image.repository=${IMAGE_PREFIX}${name}" --set "$c.image.pullPolicy=$PULL_POLICY")
  [ -n "${IMAGE_TAG:-}" ] && values+=(--set "$c.image.tag=$IMAGE_TAG")
done

step "helm install --wait"
# shellcheck disable=SC2086 # HELM_EXTRA_ARGS is a list of arguments
# The pod runtime on: examples/k8s/pod-tools.yaml runs an exec and an fn Tool in Pods.
helm install "$RELEASE" charts/mcc --namespace "$NS" --create-namespace --wait \
  --timeout "${TIMEOUT}s" "${values[@]}" --set podRuntime.enabled=true --set "podRuntime.namespaces={$NS}" \
  ${HELM_EXTRA_ARGS:-} || fail "helm install"
helm -n "$NS" get notes "$RELEASE" | head -30
kubectl -n "$NS" get deploy,pods,svc,networkpolicy,pdb -o wide

step "examples/k8s (in the trusted namespace $NS, as the tenancy defaults want)"
kubectl apply -f examples/k8s/namespace.yaml
kubectl apply -f examples/k8s/
kubectl label namespace agents mcc.dev/gateway-access=true --overwrite
for tool in $(kubectl -n "$NS" get tools.mcc.dev -o name); do
  kubectl -n "$NS" wait --for=condition=Ready --timeout="${TIMEOUT}s" "$tool" || fail "$tool is not Ready"
done
kubectl -n "$NS" wait --for=condition=Ready --timeout="${TIMEOUT}s" usergrants.mcc.dev --all || fail "UserGrants not Ready"
kubectl -n "$NS" get tools.mcc.dev,usergrants.mcc.dev
catalog_has() { kubectl -n "$NS" get configmap "$FULL-catalog" -o jsonpath='{.data.catalog\.json}' | grep -q "\"$1\""; }
until_ok "the catalog lists public.greet" catalog_has public.greet

step "RBAC: what the chart grants, and nothing more"
can yes get "configmaps/$FULL-catalog" -n "$NS" --as "$GW_SA"
can yes watch "configmaps/$FULL-catalog" -n "$NS" --as "$GW_SA"
can no list configmaps -n "$NS" --as "$GW_SA"
can no update "configmaps/$FULL-catalog" -n "$NS" --as "$GW_SA"
can yes create tokenreviews.authentication.k8s.io --as "$GW_SA"
can yes get secrets/ops-api -n "$NS" --as "$GW_SA"
can no list secrets -n "$NS" --as "$GW_SA"
can no watch secrets --all-namespaces --as "$GW_SA"
can yes create pods -n "$NS" --as "$GW_SA"          # the pod runtime (podRuntime.enabled)
can yes get pods/log -n "$NS" --as "$GW_SA"
can no update pods -n "$NS" --as "$GW_SA"
can yes create secrets -n "$NS" --as "$GW_SA"       # each call's input, owned by its Pod
can no update secrets -n "$NS" --as "$GW_SA"
can no create tools.mcc.dev -n "$NS" --as "$GW_SA"
can yes update usergrants.mcc.dev --subresource=finalizers -n "$NS" --as "$OP_SA"
can yes patch "configmaps/$FULL-catalog" -n "$NS" --as "$OP_SA"
can no delete configmaps/kube-root-ca.crt -n "$NS" --as "$OP_SA"
can yes update "leases.coordination.k8s.io/$FULL-operator" -n "$NS" --as "$OP_SA"
can no update leases.coordination.k8s.io/someone-else -n "$NS" --as "$OP_SA"
can no create pods -n "$NS" --as "$OP_SA"
can yes create secrets -n "$NS" --as "$OP_SA"
can no list secrets --all-namespaces --as "$OP_SA"
can no get secrets -n agents --as "$OP_SA"
can no list namespaces --as "$OP_SA"
kubectl create namespace team-demo --dry-run=client -o yaml | kubectl apply -f -
kubectl -n team-demo create rolebinding dev-edit --clusterrole=edit --user=dev --dry-run=client -o yaml | kubectl apply -f -
kubectl -n team-demo create rolebinding auditor-view --clusterrole=view --user=auditor --dry-run=client -o yaml | kubectl apply -f -
until_ok "edit aggregates the tool-editor role" \
  sh -c "[ \"\$(kubectl auth can-i create tools.mcc.dev -n team-demo --as dev)\" = yes ]"
can no create usergrants.mcc.dev -n team-demo --as dev
can yes list usergrants.mcc.dev -n team-demo --as auditor
can no create tools.mcc.dev -n team-demo --as auditor

step "MCP through the Service, from inside the cluster"
key=$(kubectl -n "$NS" get secret alice-api-key -o jsonpath='{.data.apiKey}' | base64 -d)
[ -n "$key" ] || fail "no API key in Secret alice-api-key"
kubectl -n agents create secret generic mcp-check-key --from-literal=key="$key" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
mcp_check agents research-agent --url "$URL" --expect-status 401
mcp_check agents research-agent --url "$URL" --token-file /var/run/mcc/token \
  --whoami research-agent --execute reports.title_case '{"s": "hello kind"}' 'Hello Kind' \
  --execute reports.pod_title_case '{"s": "hello pods"}' 'Hello Pods'
mcp_check agents research-agent --url "$URL" --api-key-env MCC_KEY --whoami alice \
  --execute ops.whoami_echo '{}' 'called by alice' --execute public.greet '{"name": "kind"}' 'Hello, kind' \
  --execute public.pod_hello '{"name": "kind"}' 'Hello, kind, from mcc-public-pod-hello'
no_tool_pods() { [ -z "$(kubectl get pods,secrets -A -l app.kubernetes.io/managed-by=mcc-gateway -o name)" ]; }
until_ok "no tool Pod or input Secret left after the calls" no_tool_pods
kubectl create namespace outsider --dry-run=client -o yaml | kubectl apply -f -
mcp_check outsider default --url "$URL" --expect-unreachable

step "the operator leader killed"
holder=$(kubectl -n "$NS" get lease "$FULL-operator" -o jsonpath='{.spec.holderIdentity}')
[ -n "$holder" ] || fail "lease $FULL-operator has no holder"
kubectl -n "$NS" delete pod "$holder" --wait=false
new_leader() {
  local h
  h=$(kubectl -n "$NS" get lease "$FULL-operator" -o jsonpath='{.spec.holderIdentity}')
  [ -n "$h" ] && [ "$h" != "$holder" ]
}
until_ok "another operator replica took the lease from $holder" new_leader
kubectl apply -f - <<EOF
apiVersion: mcc.dev/v1alpha1
kind: Tool
metadata:
  name: public.after-failover
  namespace: $NS
spec:
  name: after_failover
  groups: [public]
  description: Published by the new operator leader.
  exec: echo failover ok
EOF
kubectl -n "$NS" wait --for=condition=Ready --timeout="${TIMEOUT}s" tools.mcc.dev/public.after-failover \
  || fail "the new leader did not reconcile a new Tool"
until_ok "the new leader publishes public.after_failover" catalog_has public.after_failover
mcp_check agents research-agent --url "$URL" --api-key-env MCC_KEY \
  --execute public.after_failover '{}' 'failover ok'

step "helm upgrade"
password() { kubectl -n "$NS" get secret "$FULL-redis-auth" -o jsonpath='{.data.redis-password}'; }
before=$(password)
helm upgrade "$RELEASE" charts/mcc --namespace "$NS" --reuse-values --wait --timeout "${TIMEOUT}s" \
  --set gateway.execution.defaultTimeoutSecs=30 || fail "helm upgrade"
[ "$(password)" = "$before" ] || fail "the upgrade changed the Redis password (sessions would be lost)"
echo "ok: the Redis password survived the upgrade"
kubectl -n "$NS" get deploy "$GW" -o jsonpath='{.spec.template.spec.containers[0].env}' \
  | grep -q '"MCC_EXECUTION__DEFAULT_TIMEOUT_SECS","value":"30"' || fail "the upgrade did not apply"
mcp_check agents research-agent --url "$URL" --api-key-env MCC_KEY --whoami alice \
  --execute public.greet '{"name": "upgrade"}' 'Hello, upgrade'

step "helm uninstall"
helm uninstall "$RELEASE" --namespace "$NS" --wait --timeout "${TIMEOUT}s" || fail "helm uninstall"
kubectl get crd tools.mcc.dev usergrants.mcc.dev >/dev/null || fail "the CRDs were removed (crds.keep)"
echo "ok: the CRDs stay (helm.sh/resource-policy: keep)"
left=$(kubectl get clusterroles,clusterrolebindings -l "app.kubernetes.io/instance=$RELEASE" -o name)
[ -z "$left" ] || fail "cluster-scoped objects left behind: $left"
left=$(kubectl -n "$NS" get deploy,svc,sa,role,rolebinding,networkpolicy,pdb,secret \
  -l "app.kubernetes.io/instance=$RELEASE" -o name)
[ -z "$left" ] || fail "release objects left behind: $left"
echo "ok: nothing of the release is left but the CRDs and what the operator wrote (the catalog ConfigMap, API-key Secrets)"

echo
echo "PASS: the chart installs, serves, survives a leader loss and an upgrade, and uninstalls"
