#!/usr/bin/env bash
# End-to-end check of the operator against a real cluster (kind, k3d, ...).
#
#   KUBECONFIG=~/.kube/config e2e/k8s.sh
#
# Installs the CRDs and the operator (the operator's objects of manifests/mcc.yaml; set MCC_OPERATOR_IMAGE to
# the image to test, or SKIP_OPERATOR_INSTALL=1 when one already runs), applies
# examples/k8s/, and checks that every example Tool becomes Ready, that the catalog
# ConfigMap lists their keys and holds no secret value, that the API-key Secret exists,
# that an invalid Tool is rejected at admission, and that a gateway (built and run here,
# reading the catalog ConfigMap through the same kubeconfig) serves the tools to alice's
# API key.
#
# The pod runtime (e2e/k8s-pod-tools.yaml): an exec and an fn Tool with `runtime: pod` in
# a namespace enforcing the restricted Pod Security Standard, run through the gateway,
# each call in its own Pod of the executor image ($MCC_EXECUTOR_IMAGE, default the
# release image; with kind, `kind load docker-image` a local one first). Checked: the
# results (params, stdin, context, valueFrom/envFrom references, uid 65533, the Pod's
# host name), that no param value ever appears in a Pod object (a watch during the
# calls), and that no Pod or Secret is left behind; the example pod Tool public.pod_hello
# (examples/k8s/pod-tools.yaml) runs too. When the operator is installed here,
# MCC_POD_NAMESPACES is set to mcc-system and that namespace; with
# SKIP_OPERATOR_INSTALL=1 the running operator must allow both (every example Tool must
# be Ready). MCC_E2E_SKIP_PODS=1 skips running Pods (the example pod Tools must still be
# Ready).
# MCC_E2E_OPERATOR=local runs the operator here instead (built with cargo, the current
# kubeconfig's credentials), for a control plane without nodes (e2e/cluster/run.sh runs
# this script that way, with MCC_E2E_SKIP_PODS=1).
# Skips (exit 0, with a message) when no cluster is reachable.
set -euo pipefail

cd "$(dirname "$0")/.."
NS_OP=mcc-system
# The examples' Tools and UserGrants live in the operator's namespace: with the default
# settings it is the trusted namespace and the one allowed the local runtime.
NS_TOOLS=$NS_OP
NS_PODS=mcc-e2e-pods
TIMEOUT=${TIMEOUT:-120}
EXECUTOR_IMAGE=${MCC_EXECUTOR_IMAGE:-ghcr.io/mcc-k8s/mcc-executor:0.1.0}
PODS=1
[ -z "${MCC_E2E_SKIP_PODS:-}" ] || PODS=

if ! command -v kubectl >/dev/null; then
  echo "SKIP: kubectl is not installed"; exit 0
fi
if [ -z "${KUBECONFIG:-}" ] && [ ! -f "$HOME/.kube/config" ]; then
  echo "SKIP: no KUBECONFIG and no ~/.kube/config: no cluster to test against"; exit 0
fi
if ! kubectl version --request-timeout=5s >/dev/null 2>&1; then
  echo "SKIP: no Kubernetes API server is reachable with the current kubeconfig"; exit 0
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

step "installing the CRDs"
kubectl apply --server-side -f crds/
kubectl wait --for condition=Established --timeout=60s crd/tools.mcc.dev crd/usergrants.mcc.dev

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
bin="${CARGO_TARGET_DIR:-target}/debug"
if [ "${MCC_E2E_OPERATOR:-}" = local ]; then
  step "running the operator here"
  kubectl create namespace "$NS_OP" --dry-run=client -o yaml | kubectl apply -f -
  cargo build -q -p mcc-operator
  pod_namespaces=$NS_TOOLS
  [ -z "$PODS" ] || pod_namespaces="$NS_TOOLS,$NS_PODS"
  MCC_OPERATOR_NAMESPACE=$NS_OP MCC_POD_NAMESPACES=$pod_namespaces POD_NAME=e2e-k8s-operator \
    MCC_METRICS_ADDR=127.0.0.1:${MCC_E2E_OPERATOR_METRICS_PORT:-18091} \
    "$bin/mcc-operator" run >/tmp/mcc-e2e-operator.log 2>&1 &
  pids+=($!)
elif [ -z "${SKIP_OPERATOR_INSTALL:-}" ]; then
  step "installing the operator"
  kubectl create namespace "$NS_OP" --dry-run=client -o yaml | kubectl apply -f -
  if [ -n "${MCC_OPERATOR_IMAGE:-}" ]; then
    sed "s#ghcr.io/mcc-k8s/mcc-operator:0.1.0#${MCC_OPERATOR_IMAGE}#" manifests/mcc.yaml \
      | kubectl apply -l app.kubernetes.io/component=operator -f -
  else
    kubectl apply -l app.kubernetes.io/component=operator -f manifests/mcc.yaml
  fi
  # The gateway may create Pods in the pod Tools' namespaces (its RBAC scope): the
  # examples' own pod Tools (examples/k8s/pod-tools.yaml) live in $NS_TOOLS.
  pod_namespaces=$NS_TOOLS
  [ -z "$PODS" ] || pod_namespaces="$NS_TOOLS,$NS_PODS"
  kubectl -n "$NS_OP" set env deploy/mcc-operator MCC_POD_NAMESPACES="$pod_namespaces"
  kubectl -n "$NS_OP" rollout status deploy/mcc-operator --timeout="${TIMEOUT}s"
fi

step "applying examples/k8s"
kubectl apply -f examples/k8s/namespace.yaml
kubectl apply -f examples/k8s/

step "waiting for every example Tool to be Ready"
kubectl -n "$NS_TOOLS" wait --for=condition=Ready --timeout="${TIMEOUT}s" tools.mcc.dev --all
kubectl -n "$NS_TOOLS" get mcct
kubectl -n "$NS_TOOLS" get mccug

step "checking the catalog ConfigMap"
deadline=$((SECONDS + TIMEOUT))
until catalog=$(kubectl -n "$NS_OP" get configmap mcc-catalog -o jsonpath='{.data.catalog\.json}' 2>/dev/null) \
      && [[ "$catalog" == *'"public.greet"'* ]]; do
  [ $SECONDS -lt $deadline ] || fail "the catalog ConfigMap does not list public.greet"
  sleep 2
done
for key in public.greet ops.whoami_echo ops.api_status reports.title_case; do
  [[ "$catalog" == *"\"$key\""* ]] || fail "catalog lacks $key"
done
[[ "$catalog" != *change-me* ]] || fail "a secret value leaked into the catalog"
[[ "$catalog" == *'"envValueFrom"'* ]] || fail "the valueFrom reference is missing"
hash=$(kubectl -n "$NS_OP" get configmap mcc-catalog -o jsonpath='{.metadata.annotations.mcc\.dev/catalog-hash}')
[ -n "$hash" ] || fail "the catalog ConfigMap has no hash annotation"

step "checking the API key of UserGrant alice"
kubectl -n "$NS_TOOLS" wait --for=condition=Ready --timeout="${TIMEOUT}s" usergrants.mcc.dev/alice
kubectl -n "$NS_TOOLS" get secret alice-api-key -o jsonpath='{.data.apiKey}' | base64 -d | grep -Eq '^mcc_[0-9a-f]{12}_' \
  || fail "Secret alice-api-key holds no mcc_<prefix>_<secret> key"
prefix=$(kubectl -n "$NS_TOOLS" get usergrant alice -o jsonpath='{.status.apiKey.prefix}')
[ -n "$prefix" ] || fail "UserGrant alice has no status.apiKey.prefix"
deadline=$((SECONDS + TIMEOUT))
until kubectl -n "$NS_OP" get configmap mcc-catalog -o jsonpath='{.data.catalog\.json}' | grep -q "\"$prefix\""; do
  [ $SECONDS -lt $deadline ] || fail "the catalog does not carry alice's key prefix $prefix"
  sleep 2
done

step "an invalid Tool is rejected at admission"
if kubectl -n "$NS_TOOLS" apply -f - <<'YAML' 2>/tmp/mcc-e2e-invalid.txt; then
apiVersion: mcc.dev/v1alpha1
kind: Tool
metadata: {name: invalid, namespace: mcc-system}
spec: {name: invalid, exec: "ls", fn: "m:f"}
YAML
  fail "a Tool with both exec and fn was admitted"
fi
grep -q "exactly one of exec, fn or curl" /tmp/mcc-e2e-invalid.txt || fail "unexpected admission error: $(cat /tmp/mcc-e2e-invalid.txt)"

step "a broken template is admitted but not Ready, with an Event"
kubectl -n "$NS_TOOLS" apply -f - <<'YAML'
apiVersion: mcc.dev/v1alpha1
kind: Tool
metadata: {name: broken, namespace: mcc-system}
spec: {name: broken, exec: "echo {{ oops "}
YAML
kubectl -n "$NS_TOOLS" wait --for=jsonpath='{.status.conditions[0].reason}'=InvalidSpec --timeout="${TIMEOUT}s" tool/broken
kubectl -n "$NS_TOOLS" delete tool broken
kubectl -n "$NS_TOOLS" wait --for=condition=Ready --timeout=10s tools.mcc.dev/public.greet

step "a UserGrant outside the trusted namespaces grants nothing"
kubectl apply -f - <<'YAML'
apiVersion: mcc.dev/v1alpha1
kind: UserGrant
metadata: {name: intruder, namespace: agents}
spec: {username: alice, groups: [admin], apiKey: {enabled: true}}
YAML
kubectl -n agents wait --for=jsonpath='{.status.conditions[0].reason}'=UntrustedNamespace --timeout="${TIMEOUT}s" usergrant/intruder
! kubectl -n agents get secret intruder-api-key >/dev/null 2>&1 || fail "an API key was minted for an untrusted grant"
sleep 3  # a publish cycle
catalog=$(kubectl -n "$NS_OP" get configmap mcc-catalog -o jsonpath='{.data.catalog\.json}')
[[ "$catalog" != *'"admin"'* ]] || fail "the untrusted grant's group reached the catalog"
kubectl -n agents delete usergrant intruder

if [ -n "$PODS" ]; then
  step "pod runtime: an exec and an fn Tool in $NS_PODS (restricted Pod Security Standard)"
  kubectl apply -f e2e/k8s-pod-tools.yaml
  kubectl -n "$NS_PODS" wait --for=condition=Ready --timeout="${TIMEOUT}s" tool/pod-shell tool/pod-hostname \
    || fail "the pod Tools are not Ready (is $NS_PODS in the operator's MCC_POD_NAMESPACES?): $(kubectl -n "$NS_PODS" get tools -o wide)"
  deadline=$((SECONDS + TIMEOUT))
  until kubectl -n "$NS_OP" get configmap mcc-catalog -o jsonpath='{.data.catalog\.json}' | grep -q '"public.pod_hostname"'; do
    [ $SECONDS -lt $deadline ] || fail "the catalog does not list the pod Tools"
    sleep 2
  done
fi

step "a gateway serves the published catalog (run here, out of cluster, with alice's API key)"
port=${MCC_E2E_GATEWAY_PORT:-18080}
key=$(kubectl -n "$NS_TOOLS" get secret alice-api-key -o jsonpath='{.data.apiKey}' | base64 -d)
cargo build -q -p mcc-gateway -p mcc-executor
# Kubernetes mode runs tools in the executor (in a pod: the gateway pod's second container).
socket="@mcc-e2e-k8s-$$"
# Gateway and executor run as one user here: the executor serves it (the chart: 65532).
"$bin/mcc-executor" serve --socket "$socket" --allow-uid "$(id -u)" >/tmp/mcc-e2e-executor.log 2>&1 &
pids+=($!)
pod_env=()
if [ -n "$PODS" ]; then
  pod_env=(MCC_EXECUTION__POD__ENABLED=true POD_NAME=e2e-k8s-gateway
           MCC_EXECUTION__POD__DEFAULT_IMAGE="$EXECUTOR_IMAGE"
           MCC_EXECUTION__POD__RUNNER_IMAGE="$EXECUTOR_IMAGE"
           MCC_EXECUTION__POD__NAMESPACES="$NS_TOOLS;$NS_PODS" MCC_EXECUTION__POD__INSTANCE=mcc-e2e)
fi
env "${pod_env[@]}" MCC_CATALOG__SOURCE=kubernetes MCC_CATALOG__NAMESPACE="$NS_OP" MCC_AUTH=api_key \
  MCC_EXECUTION__EXECUTOR_SOCKET="$socket" \
  MCC_SERVER__PORT="$port" "$bin/mcc-gateway" serve >/tmp/mcc-e2e-gateway.log 2>&1 &
pids+=($!)
deadline=$((SECONDS + TIMEOUT))
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the gateway never became ready: $(tail -5 /tmp/mcc-e2e-gateway.log)"
  sleep 1
done
mcp() { # method, params JSON, [session id] -> response body (JSON answers are on by default)
  curl -sf "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $key" \
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    ${3:+-H "mcp-session-id: $3"} -D /tmp/mcc-e2e-headers.txt \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}"
}
mcp initialize '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}' >/dev/null \
  || fail "initialize was refused"
sid=$(grep -i '^mcp-session-id:' /tmp/mcc-e2e-headers.txt | cut -d' ' -f2 | tr -d '\r')
curl -sf "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $key" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H "mcp-session-id: $sid" \
  -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
mcp tools/call '{"name":"whoami","arguments":{}}' "$sid" | grep -q 'username: alice' \
  || fail "whoami over alice's API key does not name alice"
mcp tools/call '{"name":"execute","arguments":{"key":"public.greet","params":{"name":"e2e"}}}' "$sid" \
  | grep -q 'Hello, e2e' || fail "execute public.greet did not greet"

if [ -n "$PODS" ]; then
  step "pod runtime: each call in its own Pod, no param value in any Pod object, nothing left"
  marker="e2e-param-$$-$RANDOM"
  # Every Pod object the calls create, as the API server stores it.
  kubectl -n "$NS_PODS" get pods -w -o json >/tmp/mcc-e2e-pods-watch.json 2>/dev/null &
  watcher=$!
  pids+=($watcher)
  sleep 1
  out=$(mcp tools/call "{\"name\":\"execute\",\"arguments\":{\"key\":\"public.pod_shell\",\"params\":{\"word\":\"$marker\"}}}" "$sid") \
    || fail "execute public.pod_shell was refused: $(tail -5 /tmp/mcc-e2e-gateway.log)"
  for want in "word=$marker" 'stdin=' 'user=alice' 'uid=65533' 'region=eu-west-3' 'token_len=24' 'host=mcc-public-pod-shell-'; do
    [[ "$out" == *"$want"* ]] || fail "public.pod_shell: '$want' missing from $out"
  done
  [ "$(grep -o "$marker" <<<"$out" | wc -l)" -ge 2 ] || fail "public.pod_shell: the params did not reach stdin: $out"
  out=$(mcp tools/call '{"name":"execute","arguments":{"key":"public.pod_hostname","params":{}}}' "$sid") \
    || fail "execute public.pod_hostname was refused"
  [[ "$out" == *mcc-public-pod-hostname-* ]] || fail "public.pod_hostname did not run in its Pod: $out"
  mcp tools/call '{"name":"execute","arguments":{"key":"public.pod_hello","params":{"name":"k8s"}}}' "$sid" \
    | grep -q 'Hello, k8s, from mcc-public-pod-hello-' || fail "the example pod Tool public.pod_hello did not run in its Pod"
  sleep 2
  kill $watcher 2>/dev/null || true
  grep -q '"mcc-public-pod-shell-' /tmp/mcc-e2e-pods-watch.json || fail "the watch saw no Pod of public.pod_shell"
  ! grep -q "$marker" /tmp/mcc-e2e-pods-watch.json || fail "a param value appeared in a Pod object"
  deadline=$((SECONDS + 60))
  selector=app.kubernetes.io/managed-by=mcc-gateway,app.kubernetes.io/instance=mcc-e2e
  until [ -z "$(kubectl get pods,secrets -A -l "$selector" -o name)" ]; do
    [ $SECONDS -lt $deadline ] || fail "left behind: $(kubectl get pods,secrets -A -l "$selector" -o name)"
    sleep 2
  done
fi
echo "PASS: operator and gateway e2e"
