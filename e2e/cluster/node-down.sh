#!/usr/bin/env bash
# Stops the node of node-up.sh: the kubelet, every process of its Pods (the node's own
# cgroup tree), the containerd shims and containerd (all by PID), then unmounts what they
# left under $MCC_CLUSTER_DIR/node, deletes the CNI bridge and the node's cgroups,
# restores the kernel settings the kubelet changed and removes the node directory.
# Run it before down.sh (down.sh calls it when a node directory is there).
#
#   e2e/cluster/node-down.sh          # --keep: keep the node directory (logs)
set -uo pipefail
dir=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
port=${MCC_CLUSTER_PORT:-16443}
nd=$dir/node
keep=false
[ "${1:-}" = "--keep" ] && keep=true
[ -d "$nd" ] || { echo "node-down.sh: no node in $dir"; exit 0; }
cgroot=/mcc-node-$port bridge=mcc$port

stop_pid() { # stop_pid PID...: TERM, up to 5 s, then KILL
  local pid alive
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return
    sleep 0.1
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null; done
}
n=0
# 1. The kubelet, so it restarts nothing; kube-proxy, then its iptables chains.
[ -f "$nd/pids/kubelet" ] && { stop_pid "$(cat "$nd/pids/kubelet")"; n=$((n + 1)); }
if [ -f "$nd/pids/kube-proxy" ]; then
  stop_pid "$(cat "$nd/pids/kube-proxy")"; n=$((n + 1))
  kbin=$("$(dirname "$0")/build.sh" --cached) && "$kbin/kube-proxy" --cleanup --proxy-mode iptables >/dev/null 2>&1
fi
# node-e2e.sh's link-local listener.
[ -f "$nd/pids/link-local" ] && { stop_pid "$(cat "$nd/pids/link-local")"; n=$((n + 1)); }
# kube-router (NetworkPolicies), then its filter rules, chains and ipsets. Its own
# --cleanup-config leaves the chains in place under iptables-nft, then crashes on the
# missing IPVS: removed here by name (KUBE-ROUTER-*, KUBE-NWPLCY-*, KUBE-POD-FW-*, the
# KUBE-SRC-*/KUBE-DST-* sets; kube-proxy's iptables mode uses none of these).
if [ -f "$nd/pids/kube-router" ]; then
  stop_pid "$(cat "$nd/pids/kube-router")"; n=$((n + 1))
  iptables-save -t filter | awk '/^-A (INPUT|FORWARD|OUTPUT) .*kube-router netpol/ { sub("^-A", "-D"); print }' \
    | while read -r rule; do eval "iptables -w $rule"; done
  chains=$(iptables-save -t filter | grep -oE '^:KUBE-(ROUTER-[A-Z]+|NWPLCY-[A-Z0-9]+|POD-FW-[A-Z0-9]+)' | tr -d :)
  for c in $chains; do iptables -w -F "$c"; done
  for c in $chains; do iptables -w -X "$c"; done
  for set in $(ipset list -n 2>/dev/null | grep -E '^KUBE-(SRC|DST)-[A-Z0-9]+$'); do ipset destroy "$set"; done
fi
# 2. Every process in the node's cgroup tree (the Pods' containers and pause processes).
procs=$(find "/sys/fs/cgroup/pids$cgroot" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
[ -n "$procs" ] && { for p in $procs; do kill -KILL "$p" 2>/dev/null; done; n=$((n + $(echo "$procs" | wc -l))); }
# 3. The shims this containerd started: their command line names its socket.
shims=()
for c in /proc/[0-9]*/cmdline; do
  if { tr '\0' ' ' < "$c"; } 2>/dev/null | grep -q -- "-address $nd/containerd.sock "; then
    p=${c#/proc/}; shims+=("${p%/cmdline}")
  fi
done
[ ${#shims[@]} -gt 0 ] && { stop_pid "${shims[@]}"; n=$((n + ${#shims[@]})); }
# 4. containerd.
[ -f "$nd/pids/containerd" ] && { stop_pid "$(cat "$nd/pids/containerd")"; n=$((n + 1)); }
# 5. Mounts under the node directory (volumes, overlay rootfs, network namespaces),
# deepest first.
awk -v p="$nd/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
done
# 6. Network: the bridge (its veths went with the namespaces).
ip link del "$bridge" 2>/dev/null
# 7. The kubelet's own iptables chains (KUBE-FIREWALL drops packets to 127.0.0.0/8 from
# other sources; the canaries tell it when someone flushed its rules). kube-proxy
# --cleanup leaves them. Shared by every kubelet of the machine, like kube-proxy's.
for ipt in iptables ip6tables; do
  for chain in INPUT OUTPUT; do
    while $ipt -w -D $chain -j KUBE-FIREWALL 2>/dev/null; do :; done
  done
  $ipt -w -F KUBE-FIREWALL 2>/dev/null; $ipt -w -X KUBE-FIREWALL 2>/dev/null
  for table in filter nat mangle; do
    $ipt -w -t $table -X KUBE-KUBELET-CANARY 2>/dev/null
    $ipt -w -t $table -X KUBE-IPTABLES-HINT 2>/dev/null
  done
done
# 8. cgroups, deepest first.
for h in /sys/fs/cgroup/*/; do
  [ -d "$h${cgroot#/}" ] && find "$h${cgroot#/}" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# 9. Kernel settings the kubelet changed.
if [ -f "$nd/sysctl.saved" ]; then
  read -r -d '' oc pa po pom < "$nd/sysctl.saved"
  sysctl -q -w vm.overcommit_memory="$oc" kernel.panic="$pa" kernel.panic_on_oops="$po" vm.panic_on_oom="$pom"
fi
rm -rf "$nd/pids"
if awk -v p="$nd/" 'index($5, p) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
  echo "node-down.sh: mounts remain under $nd; kept it (never rm -rf through a mount)" >&2
elif ! $keep; then
  rm -rf "$nd"
fi
echo "node-down.sh: stopped $n processes" >&2
