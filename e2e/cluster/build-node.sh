#!/usr/bin/env bash
# Builds the node's own programs once and prints the directory that holds them:
# containerd 2, containerd-shim-runc-v2 and ctr, and CoreDNS (the cluster DNS,
# node-e2e.sh), from the Go modules pinned in node-tools/go.mod (the kubelet and kube-proxy come from build.sh, the control plane's
# build; runc and the CNI plugins are Debian's, see node-up.sh).
#
#   e2e/cluster/build-node.sh            # -> ~/.cache/mcc-k8s/node-<hash>/bin
#   e2e/cluster/build-node.sh --cached   # the same, or exit 1 when it would have to build
#
# A module of its own (node-tools/, not tools/) so that the control plane's cache key
# does not move. Cached like build.sh (gobuild.sh): binaries keyed by a hash of
# node-tools/go.mod and go.sum, Go's module and build caches shared with build.sh, a
# `.complete` marker.
# Optional: nothing in .ci/run calls it yet (issue 31). Cold (empty module and build
# caches, 2 cores): 190 s, 1.2 GB of caches; 120 s with build.sh's caches warm.
#
# Why containerd 2 from its module: Kubernetes 1.36+ refuses containerd 1.x, and Debian
# bookworm has 1.6.20. CGO_ENABLED=0 drops only the btrfs snapshotter (cgo); overlayfs
# and native remain. The shim is built with `no_grpc`, as containerd's Makefile does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/node-tools
. "$here/gobuild.sh"

pkg=github.com/containerd/containerd/v2
version=$(go_module_version "$tools" $pkg)
[ -n "$version" ] || { echo "build-node.sh: $tools/go.mod requires no containerd" >&2; exit 1; }
gobuild_start build-node.sh "$tools" node "containerd $version" "${1:-}"
ld="-s -w -X $pkg/version.Version=$version -X $pkg/version.Revision=module -X $pkg/version.Package=$pkg"
go build -trimpath -tags "urfave_cli_no_docs osusergo netgo" -ldflags "$ld" -o "$out/" \
  $pkg/cmd/containerd $pkg/cmd/ctr
go build -trimpath -tags "urfave_cli_no_docs osusergo netgo no_grpc" -ldflags "$ld" -o "$out/" \
  $pkg/cmd/containerd-shim-runc-v2
# CoreDNS with its default plugin set (kubernetes, forward, cache, …), static: it runs
# in a scratch image (node-e2e.sh writes it with oci_image.py).
cpkg=github.com/coredns/coredns
cversion=$(go_module_version "$tools" $cpkg)
go build -trimpath -tags "osusergo netgo" -ldflags "-s -w -X $cpkg/coremain.GitCommit=module-$cversion" \
  -o "$out/coredns" $cpkg
gobuild_done build-node.sh
