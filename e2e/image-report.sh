#!/usr/bin/env bash
# Image sizes, binary sizes before/after strip, and the cold start of the chart's gateway
# pod to ready (issue 14). One command, on the machine that runs e2e/pod.sh:
#
#   e2e/image-report.sh                 # prints a Markdown report; ROUNDS=5 by default
#   e2e/image-report.sh --rounds 9      # arguments go to e2e/image_report.py
#
# 1. the release binaries, as the Dockerfiles' build stages build them: mcc-gateway and
#    mcc-operator each in its own `cargo build --release` (features unified per binary,
#    as in CI), into $CARGO_TARGET_DIR (default ~/.cache/mcc-target; shared with the
#    benchmarks, so line tables stay in, see [profile.release] in Cargo.toml);
# 2. the images with scripts/images.sh, as e2e/pod.sh builds them but from the release
#    binaries (MCC_PROFILE=release) and tagged `release` (pod.sh's `dev` images are left
#    alone): gateway executor operator redis, and the gateway with the search model baked
#    in as `release-model` (the model from scripts/fetch-model.sh, cached);
#    images.sh strips each binary into the image (binutils strip: symbols and debug info);
# 3. helm and the Python SDK as e2e/pod.sh gets them (e2e/lib.sh);
# 4. e2e/image_report.py: sizes, then the cold start of the process, the container and
#    the chart's gateway pod (podman kube play) to /readyz 200.
# Results: gateway/benches/RESULTS-images.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. e2e/lib.sh

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}
cache=${MCC_IMAGES_CACHE:-$HOME/.cache/mcc-images}
started=$SECONDS

if [ -z "${MCC_E2E_NO_BUILD:-}" ]; then
    cargo build --quiet --release --locked -p mcc-gateway --bin mcc-gateway
    cargo build --quiet --release --locked -p mcc-operator --bin mcc-operator
fi
export MCC_PROFILE=release
MCC_IMAGE_TAG=release scripts/images.sh gateway executor operator redis
MCC_IMAGE_TAG=release-model MCC_IMAGE_MODEL=baked scripts/images.sh gateway
export CONTAINERS_CONF=$cache/containers.conf
echo "image-report.sh: binaries and images ready in $((SECONDS - started)) s" >&2

e2e_helm
e2e_python "$cache"
"$python" e2e/image_report.py --tag release "$@"
