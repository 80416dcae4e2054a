#!/usr/bin/env bash
# A local Kubernetes control plane, as processes: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, built from their Go modules by build.sh
# (once per version, cached in ~/.cache/mcc-k8s). No node: Pods stay Pending.
#
#   e2e/cluster/up.sh          # prints `export KUBECONFIG=…` when the API server is ready
#   e2e/cluster/down.sh        # stops every process by PID and removes the state
#
# State (certificates, kubeconfigs, etcd data, logs, PIDs) lives in MCC_CLUSTER_DIR
# (default /tmp/mcc-cluster). Ports: MCC_CLUSTER_PORT (API server, default 16443); etcd,
# the controller manager and the scheduler take the next ports up. Everything listens on
# 127.0.0.1 only. A second `up.sh` while one runs says so and exits 1.
# MCC_CLUSTER_NODE=1 adds what node-up.sh's kubelet needs (issue 31; see below), and
# then the API server listens on the node's address instead (the CNI bridge's, made here).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
port=${MCC_CLUSTER_PORT:-16443}
etcd_port=$((port + 1)) etcd_peer=$((port + 2)) kcm_port=$((port + 3)) sched_port=$((port + 4))
# The Service network; its first address is the `kubernetes` Service's, so it is in the
# API server's certificate.
service_cidr=10.96.0.0/16 service_ip=10.96.0.1

if [ -f "$dir/pids/kube-apiserver" ] && kill -0 "$(cat "$dir/pids/kube-apiserver")" 2>/dev/null; then
  echo "up.sh: a control plane already runs from $dir (e2e/cluster/down.sh stops it)" >&2
  exit 1
fi
for p in $port $etcd_port $etcd_peer $kcm_port $sched_port; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "up.sh: port $p on 127.0.0.1 is taken; set MCC_CLUSTER_PORT to a free range" >&2
    exit 1
  fi
done
command -v openssl >/dev/null || { echo "up.sh: openssl is needed for the certificates" >&2; exit 1; }
# Where the API server listens and what it advertises. Default: 127.0.0.1, no endpoint
# reconciler (the `kubernetes` Service has no endpoints: nothing runs in Pods).
# MCC_CLUSTER_NODE=1: the node's address, the CNI bridge's gateway address that
# node-up.sh uses (10.244.<port/10 % 256>.1; the bridge is made here, before the API
# server binds it), and the lease reconciler publishes it as the `kubernetes` Service's
# endpoint: Pods reach the API server at 10.96.0.1:443 through kube-proxy. Still on this
# machine only (a bridge with no uplink); every kubeconfig then names that address.
api_host=127.0.0.1 reconciler=none san_node=
if [ "${MCC_CLUSTER_NODE:-0}" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "up.sh: MCC_CLUSTER_NODE=1 needs root (the node's bridge)" >&2; exit 1; }
  pod_cidr=${MCC_NODE_POD_CIDR:-10.244.$(( (port / 10) % 256 )).0/24}
  api_host=${pod_cidr%.0/24}.1 reconciler=lease san_node=,IP:${pod_cidr%.0/24}.1
  bridge=mcc$port
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
  ip addr replace "$api_host/${pod_cidr#*/}" dev "$bridge"
  ip link set "$bridge" up
fi

bin=$("$here/build.sh")
rm -rf "$dir"
mkdir -p "$dir"/{pki,logs,pids}
# down.sh deletes the bridge even when no node ever ran.
[ "${MCC_CLUSTER_NODE:-0}" = 1 ] && echo "$bridge" > "$dir/bridge"
mkdir -m 0700 "$dir/etcd"
pki=$dir/pki

# --- Certificates: one CA signs the API server's serving certificate and every client's.
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=mcc-e2e-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
cert() { # cert NAME SUBJECT [SAN]
  local name=$1 subj=$2 san=${3:-}
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$pki/$name.key" -out "$pki/$name.csr"
  local ext=$pki/$name.ext
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' > "$ext"
  fi
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$ext" -out "$pki/$name.crt"
}
cert apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:$service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local$san_node"
cert admin "/O=system:masters/CN=mcc-e2e-admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
# With MCC_CLUSTER_NODE=1 (node-up.sh, issue 31) the API server shows kubelets a client
# certificate of its own (logs, exec, port-forward; node-up.sh binds it to
# system:kubelet-api-admin) and checks theirs against the CA, at the node's InternalIP.
# Unset (the default, what .ci/run does), none of this is there.
node_flags=()
if [ "${MCC_CLUSTER_NODE:-0}" = 1 ]; then
  cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client"
  node_flags=(--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt"
    --kubelet-client-key "$pki/apiserver-kubelet-client.key"
    --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP)
fi
# ServiceAccount tokens: signed with this key by the API server (TokenRequest) and the
# controller manager (legacy token Secrets, none used here), verified with its public half.
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

kubeconfig() { # kubeconfig NAME: a kubeconfig with NAME's client certificate
  cat > "$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: mcc-e2e
    cluster: {server: "https://$api_host:$port", certificate-authority: "$pki/ca.crt"}
users:
  - name: $1
    user: {client-certificate: "$pki/$1.crt", client-key: "$pki/$1.key"}
contexts:
  - name: mcc-e2e
    context: {cluster: mcc-e2e, user: $1}
current-context: mcc-e2e
EOF
}
for who in admin controller-manager scheduler; do kubeconfig "$who"; done

start() { # start NAME ARGS...: runs bin/NAME in the background, its log and PID in $dir
  local name=$1; shift
  setsid "$bin/$name" "$@" >"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name"
}
fail() {
  echo "up.sh: $*" >&2
  for log in "$dir"/logs/*.log; do echo "--- tail of $log" >&2; tail -15 "$log" >&2; done
  "$here/down.sh" --keep >&2 || true
  exit 1
}

# --- etcd: one member, no fsync (a test cluster's data is thrown away).
start etcd --name mcc-e2e --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "mcc-e2e=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level warn

# --- kube-apiserver: the default admission plugins (Pod Security, ServiceAccount,
# NamespaceLifecycle, ResourceQuota, …), RBAC, ServiceAccount tokens from sa.key.
start kube-apiserver \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address "$api_host" --advertise-address "$api_host" --secure-port "$port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range "$service_cidr" \
  --endpoint-reconciler-type "$reconciler" \
  --profiling=false "${node_flags[@]}"

# --- Ready: /readyz of the API server (with its RBAC bootstrap policy in place) before
# the controllers start: they exit when their first requests are refused.
export KUBECONFIG=$dir/admin.kubeconfig
for _ in $(seq 600); do
  "$bin/kubectl" get --raw /readyz >/dev/null 2>&1 && break
  for p in etcd kube-apiserver; do kill -0 "$(cat "$dir/pids/$p")" 2>/dev/null || fail "$p exited"; done
  sleep 0.1
done
"$bin/kubectl" get --raw /readyz >/dev/null 2>&1 || fail "kube-apiserver not ready after 60 s"

# --- kube-controller-manager: every default controller (ServiceAccounts and their
# tokens, kube-root-ca.crt, garbage collection, namespaces, Deployments, ReplicaSets…).
start kube-controller-manager \
  --kubeconfig "$dir/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --use-service-account-credentials --service-cluster-ip-range "$service_cidr" \
  --leader-elect=false --profiling=false

start kube-scheduler \
  --kubeconfig "$dir/scheduler.kubeconfig" \
  --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
  --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false --profiling=false

# The controllers' first work: the default ServiceAccount of `default`.
for _ in $(seq 300); do
  "$bin/kubectl" -n default get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.1
done
"$bin/kubectl" -n default get serviceaccount default >/dev/null 2>&1 \
  || fail "kube-controller-manager made no default ServiceAccount within 30 s"

cat > "$dir/env" <<EOF
export KUBECONFIG=$dir/admin.kubeconfig
export PATH=$bin:\$PATH
EOF
echo "up.sh: Kubernetes $("$bin/kubectl" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') ready at https://$api_host:$port ($dir)" >&2
echo "export KUBECONFIG=$dir/admin.kubeconfig PATH=$bin:\$PATH"
