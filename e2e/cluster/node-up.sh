#!/usr/bin/env bash
# A node for the local control plane (issue 31): containerd 2, a kubelet and kube-proxy
# as host processes, registered as node `mcc-node`, running real Pods with runc and CNI
# bridge networking. Optional: nothing in .ci/run calls it yet. node-probe.sh checks it.
# Times (2-core VM): Ready 2-5 s after containerd starts, the script 3-8 s in all.
#
#   MCC_CLUSTER_NODE=1 e2e/cluster/up.sh   # the control plane, able to reach kubelets
#   e2e/cluster/node-up.sh                 # containerd + kubelet; waits for Ready
#   e2e/cluster/node-down.sh               # stops them, their Pods, mounts, cgroups
#
# Same MCC_CLUSTER_DIR / MCC_CLUSTER_PORT as up.sh (whose MCC_CLUSTER_NODE=1 API server
# listens on the node IP: the kubeconfigs here take its address from admin.kubeconfig).
# The kubelet's clusterDNS is 10.96.0.10 (MCC_NODE_CLUSTER_DNS), where node-e2e.sh runs
# CoreDNS; without it Pods' lookups of cluster names fail. State in $MCC_CLUSTER_DIR/node
# (containerd root and state, kubelet root, CNI config, logs, pids). The kubelet listens
# on the node IP (the bridge's address, 10.244.<port/10 % 256>.1) on MCC_CLUSTER_PORT+10
# (its API) and on 127.0.0.1:MCC_CLUSTER_PORT+11 (healthz).
#
# What it uses (versions on 2026-12-06): kubelet v1.37.2 (build.sh), containerd v2.4.2
# with containerd-shim-runc-v2 and ctr (build-node.sh), Debian's runc 1.1.5 (bookworm
# `runc`), Debian's CNI plugins 1.1.1 (`containernetworking-plugins`: bridge, host-local,
# loopback, portmap), a pause image from Debian's static `catatonit -P` and a busybox
# image from Debian's `busybox-static` (oci_image.py; imported, no registry).
#
# Settings this machine needs, and why (2-core Firecracker VM, kernel 6.18, PID 1 is not
# systemd, cgroup v1 hybrid layout with cgroup2 at /sys/fs/cgroup/unified, root without
# CAP_SYS_RESOURCE):
# - kubelet cgroupDriver: cgroupfs and containerd SystemdCgroup = false: no systemd.
# - kubelet failCgroupV1: false: Kubernetes >= 1.35 refuses cgroup v1 unless told.
# - kubelet cgroupRoot /mcc-node-<port> (made here in every v1 hierarchy): the node's
#   pods live in their own tree, so two nodes never share `kubepods` and node-down.sh
#   kills exactly this node's processes.
# - containerd restrict_oom_score_adj = true: the VM drops CAP_SYS_RESOURCE, so runc
#   cannot lower a process' oom_score_adj (the pause container and Guaranteed pods ask
#   for < 0); containerd clamps to its own value instead.
# - kubelet evictionHard at 1 % of disk: the disk is shared with CI builds; the default
#   10 % would evict pods (and refuse new ones) when builds fill it.
# - kubelet sets vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1 (it
#   always does unless protectKernelDefaults, which then refuses to start): node-up.sh
#   saves the old values and node-down.sh restores them.
# - containerd's own sockets, root, state, runc root, NRI off, shim sockets under the
#   node directory: nothing under /run/containerd or /var/lib/containerd is touched.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
port=${MCC_CLUSTER_PORT:-16443}
node=${MCC_NODE_NAME:-mcc-node}
kubelet_port=$((port + 10)) healthz_port=$((port + 11))
# One /24 per control plane port, so two nodes on this machine never share a subnet.
pod_cidr=${MCC_NODE_POD_CIDR:-10.244.$(( (port / 10) % 256 )).0/24}
bridge=mcc$port                   # at most 15 characters
# The node's InternalIP: the bridge's (gateway) address. The kubelet refuses a loopback
# node IP and the API server reaches kubelets at their InternalIP; this kernel has no
# dummy interfaces, and eth0 would put the kubelet on the machine's network.
node_ip=${pod_cidr%.0/24}.1
cgroot=/mcc-node-$port
nd=$dir/node
pki=$dir/pki
export KUBECONFIG=$dir/admin.kubeconfig

[ -f "$pki/apiserver-kubelet-client.crt" ] || {
  echo "node-up.sh: no control plane with MCC_CLUSTER_NODE=1 in $dir (MCC_CLUSTER_NODE=1 e2e/cluster/up.sh)" >&2; exit 1; }
if [ -f "$nd/pids/kubelet" ] && kill -0 "$(cat "$nd/pids/kubelet")" 2>/dev/null; then
  echo "node-up.sh: a node already runs from $nd (e2e/cluster/node-down.sh stops it)" >&2; exit 1
fi
[ "$(id -u)" = 0 ] || { echo "node-up.sh: needs root (mounts, cgroups, network namespaces)" >&2; exit 1; }
for t in runc /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/lib/cni/portmap \
  /usr/bin/catatonit /bin/busybox; do
  command -v "$t" >/dev/null || { echo "node-up.sh: $t missing (apt-get install runc containernetworking-plugins catatonit busybox-static)" >&2; exit 1; }
done
kbin=$("$here/build.sh")
nbin=$("$here/build-node.sh")
kubectl=$kbin/kubectl

mkdir -p "$nd"/{logs,pids,pki,cni/net.d,images,cni-ipam,kubelet,containerd/root,containerd/state}
fail() {
  echo "node-up.sh: $*" >&2
  for log in "$nd"/logs/*.log; do echo "--- tail of $log" >&2; tail -20 "$log" >&2; done
  exit 1
}

# --- Certificates, signed by the control plane's CA: the kubelet's client identity
# (Node authorizer: system:node:<name> in system:nodes) and its serving certificate
# (the API server checks it: --kubelet-certificate-authority).
ossl() { openssl "$@" 2>/dev/null; }
sign() { # sign NAME SUBJECT EXT
  ossl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$nd/pki/$1.key" -out "$nd/pki/$1.csr"
  printf '%b' "$3" > "$nd/pki/$1.ext"
  ossl x509 -req -in "$nd/pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$nd/pki/$1.ext" -out "$nd/pki/$1.crt"
}
sign kubelet-client "/O=system:nodes/CN=system:node:$node" 'extendedKeyUsage=clientAuth\n'
# kube-proxy as system:kube-proxy: bound to system:node-proxier by the default policy.
sign kube-proxy "/CN=system:kube-proxy" 'extendedKeyUsage=clientAuth\n'
# kube-router's network policy controller as system:kube-router (its ClusterRole below).
sign kube-router "/CN=system:kube-router" 'extendedKeyUsage=clientAuth\n'
sign kubelet-serving "/CN=$node" "subjectAltName=IP:$node_ip,IP:127.0.0.1,DNS:$node\nextendedKeyUsage=serverAuth\n"
# The API server's address as up.sh wrote it (the node IP with MCC_CLUSTER_NODE=1).
server=$("$kubectl" config view -o jsonpath='{.clusters[0].cluster.server}')
kubeconfig() { # kubeconfig NAME CERT
  cat > "$nd/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: mcc-e2e
    cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
  - name: $1
    user: {client-certificate: "$nd/pki/$2.crt", client-key: "$nd/pki/$2.key"}
contexts:
  - name: mcc-e2e
    context: {cluster: mcc-e2e, user: $1}
current-context: mcc-e2e
EOF
}
kubeconfig kubelet kubelet-client
kubeconfig kube-proxy kube-proxy
kubeconfig kube-router kube-router
# The API server's requests to the kubelet (logs, exec) are authorized by the kubelet
# with a SubjectAccessReview: grant its client certificate the kubelet API.
"$kubectl" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mcc-e2e:kube-apiserver-kubelet-client}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
# What kube-router's network policy controller reads (its router and proxy are off).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: mcc-e2e:kube-router}
rules:
  - apiGroups: [""]
    resources: [namespaces, pods, services, endpoints, nodes]
    verbs: [get, list, watch]
  - apiGroups: [networking.k8s.io]
    resources: [networkpolicies]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mcc-e2e:kube-router}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mcc-e2e:kube-router}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kube-router}]
EOF

# --- CNI: one bridge, made here with the gateway address (the node IP) so the kubelet
# can listen on it before the first Pod; the bridge plugin keeps an identical address.
ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
ip addr replace "$node_ip/${pod_cidr#*/}" dev "$bridge"
ip link set "$bridge" up
# One bridge, host-local addresses; pods reach each other and the node, no NAT
# to the outside (ipMasq false: nothing leaves this machine).
cat > "$nd/cni/net.d/10-mcc.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "mcc-pods",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$nd/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

# --- containerd: everything under $nd; CRI with runc (cgroupfs), our CNI, our pause.
pause_ref=localhost/mcc-pause:1
cat > "$nd/containerd.toml" <<EOF
version = 3
root = '$nd/containerd/root'
state = '$nd/containerd/state'
[grpc]
  address = '$nd/containerd.sock'
[ttrpc]
  address = '$nd/containerd.sock.ttrpc'
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '$pause_ref'
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = '$(command -v runc)'
  Root = '$nd/runc'
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '$nd/cni/net.d'
[plugins.'io.containerd.internal.v1.opt']
  path = '$nd/containerd/opt'
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.shim.v1.manager']
  socket_dir = '$nd/containerd/s'
EOF
start() { # start NAME ARGS...: runs NAME in the background, its log and PID in $nd
  local name=$1; shift
  PATH=$nbin:$PATH setsid "$@" >"$nd/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$nd/pids/$name"
}
t0=$(date +%s)
start containerd "$nbin/containerd" --config "$nd/containerd.toml"
ctr() { "$nbin/ctr" --address "$nd/containerd.sock" -n k8s.io "$@"; }
for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
ctr version >/dev/null 2>&1 || fail "containerd not answering on $nd/containerd.sock"

# --- Images, no registry: pause (catatonit -P reaps and sleeps) and busybox.
python3 "$here/oci_image.py" "$nd/images/pause.tar" "$pause_ref" \
  --add /usr/bin/catatonit:/catatonit --entrypoint=/catatonit --entrypoint=-P --user 65535:65535
bb_links=()
for a in sh echo cat ls sleep env id wget nc; do bb_links+=(--link "/bin/$a:busybox"); done
python3 "$here/oci_image.py" "$nd/images/busybox.tar" localhost/mcc-busybox:1 \
  --add /bin/busybox:/bin/busybox "${bb_links[@]}" --cmd /bin/sh
for i in pause busybox; do ctr images import --local "$nd/images/$i.tar" >/dev/null || fail "ctr images import $i failed"; done

# --- cgroups: this node's root in every v1 hierarchy (and the v2 one, for the hybrid
# layout's name=systemd/unified mounts runc also joins).
for h in /sys/fs/cgroup/*/; do
  [ -f "$h/cgroup.procs" ] && mkdir -p "$h${cgroot#/}"
done

# --- kernel settings the kubelet changes: keep the old values for node-down.sh.
sysctl -n vm.overcommit_memory kernel.panic kernel.panic_on_oops vm.panic_on_oom > "$nd/sysctl.saved"

cat > "$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
tlsCertFile: $nd/pki/kubelet-serving.crt
tlsPrivateKeyFile: $nd/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$nd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $cgroot
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
# The kube-dns Service's conventional address (the 10th of 10.96.0.0/16); node-e2e.sh runs
# CoreDNS behind it. Without it Pods get the host's resolv.conf.
clusterDNS: [${MCC_NODE_CLUSTER_DNS:-10.96.0.10}]
podCIDR: $pod_cidr
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
EOF
start kubelet "$kbin/kubelet" --config "$nd/kubelet.yaml" --kubeconfig "$nd/kubelet.kubeconfig" \
  --root-dir "$nd/kubelet" --hostname-override "$node" --node-ip "$node_ip"

for _ in $(seq 600); do
  [ "$("$kubectl" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
  for p in containerd kubelet; do kill -0 "$(cat "$nd/pids/$p")" 2>/dev/null || fail "$p exited"; done
  sleep 0.2
done
[ "$("$kubectl" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] \
  || fail "node $node not Ready after 120 s"

# --- kube-proxy (iptables mode; Debian's iptables 1.8.9 is the nf_tables flavour): the
# Service IPs of 10.96.0.0/16 reach their Pods. Its chains are global to the machine, so
# only one node with kube-proxy per machine (MCC_NODE_PROXY=0 leaves it out).
# --conntrack-max-per-core 0 and --iptables-localhost-nodeports=false: it changes no
# sysctl (nf_conntrack_max, route_localnet) of the shared machine.
if [ "${MCC_NODE_PROXY:-1}" = 1 ]; then
  start kube-proxy "$kbin/kube-proxy" --kubeconfig "$nd/kube-proxy.kubeconfig" \
    --hostname-override "$node" --cluster-cidr "$pod_cidr" --proxy-mode iptables \
    --bind-address 127.0.0.1 --healthz-bind-address "127.0.0.1:$((port + 12))" \
    --metrics-bind-address "127.0.0.1:$((port + 13))" --nodeport-addresses primary \
    --conntrack-max-per-core 0 --iptables-localhost-nodeports=false
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$((port + 12))/healthz" >/dev/null 2>&1 && break
    kill -0 "$(cat "$nd/pids/kube-proxy")" 2>/dev/null || fail "kube-proxy exited"
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$((port + 12))/healthz" >/dev/null 2>&1 || fail "kube-proxy not healthy after 20 s"
fi

# --- NetworkPolicies (MCC_NODE_NETPOL=1, the default): kube-router's network policy
# controller (build-netpol.sh), as k3s runs it, with its router, service proxy and CNI
# off: each policy becomes iptables chains and ipsets on this node (FORWARD, INPUT and
# OUTPUT, through br_netfilter for traffic inside the bridge). Like kube-proxy's, its
# rules are global to the machine: one such node per machine. node-down.sh removes them
# (kube-router --cleanup-config). sigs.k8s.io/kube-network-policies cannot run here: it
# queues packets with nftables' `queue`, and this kernel has no CONFIG_NFT_QUEUE.
if [ "${MCC_NODE_NETPOL:-1}" = 1 ]; then
  command -v ipset >/dev/null || fail "ipset missing (apt-get install ipset), needed by kube-router"
  pbin=$("$here/build-netpol.sh")
  start kube-router "$pbin/kube-router" --kubeconfig "$nd/kube-router.kubeconfig" \
    --hostname-override "$node" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --health-port 0 --metrics-port 0 --iptables-sync-period 1m
  # Ready once its chains hook FORWARD (it has no health address but on every interface).
  for _ in $(seq 100); do
    iptables -w -S FORWARD 2>/dev/null | grep -q KUBE-ROUTER-FORWARD && break
    kill -0 "$(cat "$nd/pids/kube-router")" 2>/dev/null || fail "kube-router exited"
    sleep 0.2
  done
  iptables -w -S FORWARD 2>/dev/null | grep -q KUBE-ROUTER-FORWARD || fail "kube-router set up no chains in 20 s"
fi
netpol=off
[ "${MCC_NODE_NETPOL:-1}" = 1 ] && netpol="kube-router $("$pbin/kube-router" --version 2>&1 | awk '{print $4}' | tr -d ,)"
echo "node-up.sh: node $node Ready in $(( $(date +%s) - t0 )) s (containerd $("$nbin/containerd" --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), kubelet $("$kbin/kubelet" --version | awk '{print $2}'), NetworkPolicies: $netpol)" >&2
