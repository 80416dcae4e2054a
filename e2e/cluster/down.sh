#!/usr/bin/env bash
# Stops the local control plane of up.sh (and any process an e2e run registered in its
# pids/ directory) by PID, each with its process group, then removes its state directory.
#
#   e2e/cluster/down.sh          # --keep: keep the state directory (logs) for a look
set -euo pipefail
dir=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
keep=false
[ "${1:-}" = "--keep" ] && keep=true
# A node of node-up.sh (issue 31) goes first: its Pods, mounts, cgroups and bridge.
[ -d "$dir/node" ] && "$(dirname "$0")/node-down.sh"
[ -d "$dir/pids" ] || { echo "down.sh: nothing runs from $dir"; exit 0; }

# Newest first, so the API server outlives its clients and etcd outlives the API server.
pids=()
for f in $(ls -t "$dir/pids"); do
  pid=$(cat "$dir/pids/$f")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  pids+=("$pid")
done
for _ in $(seq 50); do
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  [ $alive -eq 0 ] && break
  sleep 0.1
done
for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; done
rm -rf "$dir/pids"
# The bridge up.sh made with MCC_CLUSTER_NODE=1 (node-down.sh deletes it when a node ran).
[ -f "$dir/bridge" ] && { ip link del "$(cat "$dir/bridge")" 2>/dev/null || true; }
$keep || rm -rf "$dir"
echo "down.sh: stopped ${#pids[@]} processes" >&2
