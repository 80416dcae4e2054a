// The node's programs beside the control plane (e2e/cluster/build-node.sh builds them):
// containerd 2 (the CRI runtime Kubernetes >= 1.36 needs), its runc shim and ctr.
// A module of its own, so the control plane's cache key (tools/go.mod) does not move.
module mcc.dev/e2e/cluster/node-tools

go 1.26.6

require github.com/containerd/containerd/v2 v2.4.2 // indirect
