#!/usr/bin/env bash
# Builds the local control plane's programs once per Kubernetes version and prints the
# directory that holds them: kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kubelet, kube-proxy and etcd, all from the Go modules pinned in tools/go.mod
# (one `go build`, so shared packages compile once).
#
#   e2e/cluster/build.sh            # -> ~/.cache/mcc-k8s/v1.37.2-<hash>/bin
#   e2e/cluster/build.sh --cached   # the same, or exit 1 when it would have to build
#
# Everything lands under ~/.cache/mcc-k8s (MCC_K8S_CACHE): the binaries, keyed by the
# version and a hash of tools/go.mod and go.sum, and Go's module and build caches. A
# finished build is marked by a `.complete` file, so an interrupted one is redone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/tools
. "$here/gobuild.sh"

version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2 }' "$tools/go.mod")
[ -n "$version" ] || { echo "build.sh: $tools/go.mod requires no k8s.io/kubernetes vX.Y.Z" >&2; exit 1; }
gobuild_start build.sh "$tools" "$version" "Kubernetes $version and etcd (cold: ~20 min on 2 cores)" "${1:-}"
minor=${version#v1.}; minor=${minor%%.*}
# What hack/lib/version.sh stamps into a release, so `/version` and `kubectl version`
# tell the truth instead of v0.0.0-master (a module has no commit to name: gitCommit stays
# empty).
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
go build -trimpath -ldflags "$ld" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
  go.etcd.io/etcd/server/v3
mv "$out/server" "$out/etcd"  # go names it after the path: .../server/v3
gobuild_done build.sh
