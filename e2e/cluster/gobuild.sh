# Sourced by build.sh, build-node.sh and build-netpol.sh (after `set -euo pipefail`): the
# cache of programs built from one pinned Go module. Defines functions only.
#
# Everything lands under ${MCC_K8S_CACHE:-~/.cache/mcc-k8s}: each build's binaries in
# <prefix>-<hash of the module's go.mod and go.sum>/bin, finished when it holds a
# `.complete` marker (an interrupted build is redone); Go's module and build caches
# (gomod/, gocache/) are shared by all three builds.

# The version of module $2 that $1/go.mod requires (empty when it requires none).
go_module_version() {
    awk -v pkg="$2" '{ for (i = 1; i < NF; i++) if ($i == pkg) print $(i + 1) }' "$1/go.mod"
}

# gobuild_start SCRIPT TOOLS PREFIX WHAT [--cached]: sets `out` to this module's binary
# directory. A finished build there: prints `out` and exits 0; none and `--cached`: exits 1.
# Otherwise gets ready to build (Go present, its shared caches exported, `out` created),
# says what it builds, and enters TOOLS; gobuild_done then marks the build finished.
gobuild_start() {
    local script=$1 tools=$2 prefix=$3 what=$4 flag=${5:-}
    local cache=${MCC_K8S_CACHE:-$HOME/.cache/mcc-k8s} key
    key=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-12)
    out=$cache/$prefix-$key/bin
    if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
    [ "$flag" != "--cached" ] || exit 1

    command -v go >/dev/null || { echo "$script: Go is not installed (needs Go >= 1.26 and the Go module proxy)" >&2; exit 1; }
    export GOMODCACHE=$cache/gomod GOCACHE=$cache/gocache GOFLAGS=-mod=mod CGO_ENABLED=0
    mkdir -p "$out"
    gobuild_started=$(date +%s)
    echo "$script: building $what into $out" >&2
    cd "$tools"
}

# gobuild_done SCRIPT: says how long it took, marks `out` finished and prints it.
gobuild_done() {
    echo "$1: built in $(( $(date +%s) - gobuild_started )) s" >&2
    touch "$out/.complete"
    echo "$out"
}
