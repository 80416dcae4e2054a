#!/usr/bin/env bash
# Builds the node's NetworkPolicy controller once and prints the directory holding it:
# kube-router (its network policy controller only: node-up.sh starts it with the router
# and the service proxy off), from the module pinned in netpol-tools/go.mod.
#
#   e2e/cluster/build-netpol.sh            # -> ~/.cache/mcc-k8s/netpol-<hash>/bin
#   e2e/cluster/build-netpol.sh --cached   # the same, or exit 1 when it would have to build
#
# Cached like build-node.sh: keyed by a hash of netpol-tools/go.mod and go.sum, Go's
# module and build caches shared with build.sh, a `.complete` marker. Cold (2 cores,
# module downloads included): about 4 min; with build.sh's caches warm less.
# It runs `iptables` and `ipset` (Debian's iptables 1.8.9, nf_tables flavour, and ipset).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/netpol-tools
cache=${MCC_K8S_CACHE:-$HOME/.cache/mcc-k8s}
pkg=github.com/cloudnativelabs/kube-router/v2
version=$(awk '{ for (i = 1; i < NF; i++) if ($i == "'$pkg'") print $(i + 1) }' "$tools/go.mod")
[ -n "$version" ] || { echo "build-netpol.sh: $tools/go.mod requires no kube-router" >&2; exit 1; }
key=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-12)
out=$cache/netpol-$key/bin
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
[ "${1:-}" != "--cached" ] || exit 1

command -v go >/dev/null || { echo "build-netpol.sh: Go is not installed (needs Go >= 1.26 and the Go module proxy)" >&2; exit 1; }
export GOMODCACHE=$cache/gomod GOCACHE=$cache/gocache GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$out"
start=$(date +%s)
echo "build-netpol.sh: building kube-router $version into $out" >&2
cd "$tools"
go build -trimpath -tags "osusergo netgo" \
  -ldflags "-s -w -X $pkg/pkg/version.Version=$version -X $pkg/pkg/version.BuildDate=module" \
  -o "$out/" $pkg/cmd/kube-router
echo "build-netpol.sh: built in $(( $(date +%s) - start )) s" >&2
touch "$out/.complete"
echo "$out"
