#!/usr/bin/env bash
# Builds the node's NetworkPolicy controller once and prints the directory holding it:
# kube-router (its network policy controller only: node-up.sh starts it with the router
# and the service proxy off), from the module pinned in netpol-tools/go.mod.
#
#   e2e/cluster/build-netpol.sh            # -> ~/.cache/mcc-k8s/netpol-<hash>/bin
#   e2e/cluster/build-netpol.sh --cached   # the same, or exit 1 when it would have to build
#
# Cached like build-node.sh (gobuild.sh): keyed by a hash of netpol-tools/go.mod and go.sum,
# Go's module and build caches shared with build.sh, a `.complete` marker. Cold (2 cores,
# module downloads included): about 4 min; with build.sh's caches warm less.
# It runs `iptables` and `ipset` (Debian's iptables 1.8.9, nf_tables flavour, and ipset).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/netpol-tools
. "$here/gobuild.sh"
pkg=github.com/cloudnativelabs/kube-router/v2
version=$(go_module_version "$tools" $pkg)
[ -n "$version" ] || { echo "build-netpol.sh: $tools/go.mod requires no kube-router" >&2; exit 1; }
gobuild_start build-netpol.sh "$tools" netpol "kube-router $version" "${1:-}"
go build -trimpath -tags "osusergo netgo" \
  -ldflags "-s -w -X $pkg/pkg/version.Version=$version -X $pkg/pkg/version.BuildDate=module" \
  -o "$out/" $pkg/cmd/kube-router
gobuild_done build-netpol.sh
