#!/usr/bin/env bash
# The chart's gateway pod (gateway + executor containers, file-mode catalog, the chart's
# Redis) run with podman and driven with the official MCP Python SDK. One command:
#
#   e2e/pod.sh            # --keep leaves the pods running
#
# 1. the gateway and executor binaries, `cargo build -p … --bins` into $CARGO_TARGET_DIR
#    (default ~/.cache/mcc-target; a no-op after CI's build; MCC_E2E_NO_BUILD=1 skips it);
# 2. the images, scripts/images.sh gateway executor redis (base image made once);
# 3. helm (PATH, else scripts/ensure-helm.sh) and the `mcp` SDK (>= 2.3, PyPI; a venv in
#    ~/.cache/mcc-images/venv when the system Python lacks it);
# 4. e2e/pod_e2e.py: render, podman kube play, checks, podman kube down;
# 5. the pod runtime's Pod spec played with podman (gateway/tests/it/pod_podman.rs, with
#    MCC_PODMAN_E2E=1): an fn and an exec tool, each result equal to the local runtime's;
#    the exec tool runs in a scratch image holding only the host's static busybox
#    (busybox-static from apt when missing).
# See e2e/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. e2e/lib.sh

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}
cache=${MCC_IMAGES_CACHE:-$HOME/.cache/mcc-images}
started=$SECONDS

if [ -z "${MCC_E2E_NO_BUILD:-}" ]; then
    cargo build --quiet --locked -p mcc-gateway -p mcc-executor --bins
fi
scripts/images.sh gateway executor redis
export CONTAINERS_CONF=$cache/containers.conf
images_done=$SECONDS

e2e_helm
e2e_python "$cache"

echo "e2e/pod.sh: binaries and images ready in $((images_done - started)) s"
rc=0
HELM="$HELM" "$python" e2e/pod_e2e.py "$@" || rc=$?

if [ ! -x /bin/busybox ] || readelf -l /bin/busybox | grep -q INTERP; then
    as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi
pod_spec_started=$SECONDS
MCC_PODMAN_E2E=1 cargo test --quiet --locked -p mcc-gateway --test it pod_podman:: || rc=$?
echo "e2e/pod.sh: the pod runtime's Pod spec with podman in $((SECONDS - pod_spec_started)) s"
echo "e2e/pod.sh: $((SECONDS - started)) s in all"
exit $rc
