#!/usr/bin/env bash
# The chart's pods under a real kubelet (issue 31), in one command; .ci/run runs it after
# the cluster e2e. Its own control plane and node (MCC_CLUSTER_DIR, default
# /tmp/mcc-node-e2e; MCC_CLUSTER_PORT, default 17443), so it never meets run.sh's.
#
#   e2e/cluster/node-e2e.sh        # --keep: leave cluster and node running (down.sh stops them)
#
# 1. the images: scripts/images.sh gateway executor operator redis (localhost/mcc-*:dev;
#    with MCC_E2E_NO_BUILD=1 only the missing ones; the debug binaries must be built);
# 2. MCC_CLUSTER_NODE=1 up.sh (the API server on the node IP, its address the
#    `kubernetes` Service's endpoint), node-up.sh (containerd, kubelet, kube-proxy);
# 3. each image `podman save`d and imported into the node's containerd (no registry);
# 4. CoreDNS (build-node.sh, a scratch image by oci_image.py) behind kube-dns 10.96.0.10;
# 5. `helm install --wait` of charts/mcc with node-values.yaml (imagePullPolicy
#    IfNotPresent: operator x2, gateway x2 with executor, the chart's Redis);
# 6. node_e2e.py: one line per check, `N passed, N failed` last.
# Needs root, Go (build.sh, build-node.sh), podman/buildah (images.sh), helm, and the
# `mcp` SDK (venv in ~/.cache/mcc-k8s/venv). See e2e/README.md, "Nodes (issue 31)".
set -euo pipefail
cd "$(dirname "$0")/../.."
. e2e/lib.sh
keep=false
[ "${1:-}" = "--keep" ] && keep=true
export MCC_CLUSTER_DIR=${MCC_CLUSTER_DIR:-/tmp/mcc-node-e2e}
export MCC_CLUSTER_PORT=${MCC_CLUSTER_PORT:-17443}
tag=${MCC_IMAGE_TAG:-dev}
start=$(date +%s)
since() { echo "$(( $(date +%s) - start )) s"; }

e2e_helm
e2e_python "$HOME/.cache/mcc-k8s"
images=(gateway executor operator redis)
if [ -n "${MCC_E2E_NO_BUILD:-}" ]; then
  missing=()
  for i in "${images[@]}"; do podman image exists "localhost/mcc-$i:$tag" || missing+=("$i"); done
  [ ${#missing[@]} -eq 0 ] || scripts/images.sh "${missing[@]}"
else
  scripts/images.sh "${images[@]}"
fi
echo "node e2e: images ready after $(since)"

eval "$(MCC_CLUSTER_NODE=1 e2e/cluster/up.sh)"
$keep || trap 'e2e/cluster/down.sh' EXIT
e2e/cluster/node-up.sh
echo "node e2e: control plane and node up after $(since)"
nd=$MCC_CLUSTER_DIR/node
nbin=$(e2e/cluster/build-node.sh --cached)
# ctr warns on every call that containerd's cgroup v1 support is deprecated: kept in a log.
ctr() { "$nbin/ctr" --address "$nd/containerd.sock" -n k8s.io "$@" 2>>"$nd/logs/ctr.log"; }
node_ip=$(kubectl get node mcc-node -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')

# --- Images into the node's containerd: docker-archive keeps the repository:tag.
for i in "${images[@]}"; do
  podman save --quiet --format docker-archive -o "$nd/images/mcc-$i.tar" "localhost/mcc-$i:$tag"
  ctr images import --local "$nd/images/mcc-$i.tar" >/dev/null || { tail -3 "$nd/logs/ctr.log"; exit 1; }
  rm -f "$nd/images/mcc-$i.tar"
done
cversion=$("$nbin/coredns" -version | awk '/^CoreDNS-/ { sub("CoreDNS-", ""); print; exit }')
python3 e2e/cluster/oci_image.py "$nd/images/coredns.tar" "localhost/mcc-coredns:$cversion" \
  --add "$nbin/coredns:/coredns" --entrypoint=/coredns --user 65532:65532
ctr images import --local "$nd/images/coredns.tar" >/dev/null || { tail -3 "$nd/logs/ctr.log"; exit 1; }
echo "node e2e: images imported after $(since): $(ctr images ls -q | grep -c '^localhost/mcc-') localhost/mcc-* images"

# --- Cluster DNS.
sed "s|COREDNS_IMAGE|localhost/mcc-coredns:$cversion|" e2e/cluster/coredns.yaml | kubectl apply -f - >/dev/null
kubectl -n kube-system rollout status deployment/coredns --timeout 120s >/dev/null \
  || echo "node e2e: CoreDNS not Available after 120 s (node_e2e.py reports it)"
echo "node e2e: CoreDNS $cversion up after $(since)"

# --- The chart, waited for by helm itself.
kubectl create namespace mcc-system >/dev/null
# The pod runtime's namespace (node-values.yaml), enforcing Pod Security `restricted`.
kubectl create namespace mcc-node-pods >/dev/null
# Its tool Pods call the gateway (node_pods.py's curl Tool): the label the gateway's
# NetworkPolicy admits callers by.
kubectl label namespace mcc-node-pods pod-security.kubernetes.io/enforce=restricted \
  mcc.dev/gateway-access=true >/dev/null

# --- For the NetworkPolicy checks (node_netpol.py): a listener on the node at a
# link-local address (on the node's bridge, removed with it by node-down.sh), the range
# the chart keeps tools from (cloud metadata).
netpol_args=()
if [ -f "$nd/pids/kube-router" ]; then
  ip addr replace 169.254.77.1/32 dev "mcc$MCC_CLUSTER_PORT"
  mkdir -p "$nd/www"
  (cd "$nd/www" && exec setsid python3 -m http.server 8099 --bind 169.254.77.1 >"$nd/logs/link-local.log" 2>&1) &
  echo $! > "$nd/pids/link-local"
  netpol_args=(--netpol)
fi
helm_start=$(date +%s) helm_rc=0
# The API server listens on MCC_CLUSTER_PORT: the port the chart's NetworkPolicies let the
# operator and Redis-less pods reach it on (enforced: kube-router, node-up.sh).
"$HELM" --kubeconfig "$KUBECONFIG" install mcc charts/mcc -n mcc-system -f e2e/cluster/node-values.yaml \
  --set "networkPolicy.apiServer.ports={$MCC_CLUSTER_PORT}" \
  --wait --timeout 300s > "$MCC_CLUSTER_DIR/helm.log" 2>&1 || helm_rc=$?
helm_seconds=$(( $(date +%s) - helm_start ))
[ $helm_rc -eq 0 ] || { echo "node e2e: helm install failed:"; tail -5 "$MCC_CLUSTER_DIR/helm.log"; }
echo "node e2e: chart installed after $(since) (helm --wait: $helm_seconds s)"

rc=0
"$python" e2e/cluster/node_e2e.py --kubeconfig "$KUBECONFIG" --helm-rc "$helm_rc" \
  --helm-seconds "$helm_seconds" --node-ip "$node_ip" --api-port "$MCC_CLUSTER_PORT" --helm "$HELM" "${netpol_args[@]}" || rc=$?
if [ $rc -ne 0 ]; then
  # What CI cannot look at once down.sh has removed the state.
  kubectl -n mcc-system get pods -o wide || true
  kubectl -n mcc-system get events --field-selector type=Warning | tail -15 || true
  for p in $(kubectl -n mcc-system get pods -o name); do
    for c in $(kubectl -n mcc-system get "$p" -o jsonpath='{.spec.containers[*].name}'); do
      echo "--- $p $c (tail)"; kubectl -n mcc-system logs "$p" -c "$c" --tail 10 2>&1 | cut -c1-300 || true
    done
  done
fi
echo "node e2e: $(since) in all"
exit $rc
