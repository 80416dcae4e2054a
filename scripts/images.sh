#!/usr/bin/env bash
# Builds the MCC container images on a machine without a registry, from binaries already
# built on the host (no second cold build), with the same Dockerfiles CI uses:
#
#   scripts/images.sh                       # gateway executor operator redis
#   scripts/images.sh gateway executor      # only these
#   MCC_IMAGE_MODEL=baked scripts/images.sh gateway   # bake the search model in
#
# Produces localhost/mcc-<name>:${MCC_IMAGE_TAG:-dev}. Steps (each skipped when done):
#  1. podman, buildah, runc, mmdebstrap from apt when missing;
#  2. a Debian bookworm minbase root filesystem made once with mmdebstrap from the host's
#     apt sources (cached in $MCC_IMAGES_CACHE, default ~/.cache/mcc-images), with the apt
#     settings of Debian's official images (no apt caches left in layers), and imported
#     as docker.io/library/debian:bookworm-slim, the Dockerfiles' base;
#  3. each binary from $CARGO_TARGET_DIR/$MCC_PROFILE (default ~/.cache/mcc-target/debug;
#     the gateway from $MCC_GATEWAY_BINARY when set) stripped into a staging directory, which is the build context of the Dockerfile's
#     `local` target (the same `runtime` stage as the CI image, minus the Rust build);
#     except mcc-executor, which this script builds itself as CI's Dockerfile does:
#     release, statically linked (RUSTFLAGS=-C target-feature=+crt-static, --target
#     <arch>-unknown-linux-gnu, so under $CARGO_TARGET_DIR/<triple>/release, apart from
#     the host builds), because the pod runtime copies it into Pods of any tool image;
#  4. buildah bud with layer caching (an unchanged binary is a cache hit), then a check
#     that the image starts read-only as uid 65532.
# Container tools run with --runtime runc and CONTAINERS_CONF holding default_ulimits = []
# (this VM refuses raising RLIMIT_NOFILE and has a hybrid cgroup layout; crun refuses it).
# See docs/images.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${MCC_IMAGES_CACHE:-$HOME/.cache/mcc-images}
target_dir=${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}
static_target=$(uname -m)-unknown-linux-gnu
profile=${MCC_PROFILE:-debug}
tag=${MCC_IMAGE_TAG:-dev}
model=${MCC_IMAGE_MODEL:-none}
base_image=docker.io/library/debian:bookworm-slim
# The base's recipe (step 2); bumping it remakes the cached tar and the imported image.
base_recipe=2
base_tar=$cache/debian-bookworm-minbase-$base_recipe.tar

log() { echo "images.sh: $*" >&2; }
die() { log "$*"; exit 1; }

images=("$@")
[ ${#images[@]} -gt 0 ] || images=(gateway executor operator redis)
for name in "${images[@]}"; do
    case $name in gateway|executor|operator|redis) ;; *) die "unknown image '$name' (gateway, executor, operator, redis)";; esac
done
case $model in none|baked) ;; *) die "MCC_IMAGE_MODEL=$model: expected none or baked";; esac

mkdir -p "$cache"
# One build at a time per cache (e2e/pod.sh and a manual run may overlap).
exec 9>"$cache/.lock"
flock 9

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Tools.
missing=()
for tool in podman:podman buildah:buildah runc:runc mmdebstrap:mmdebstrap strip:binutils; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} (apt-get)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

conf=$cache/containers.conf
if [ ! -f "$conf" ]; then
    printf '[containers]\ndefault_ulimits = []\n' >"$conf"
fi
export CONTAINERS_CONF=$conf
podman() { command podman --runtime runc "$@"; }

# 2. Base image.
if [ "$(podman image inspect --format '{{index .Labels "dev.mcc.base-recipe"}}' "$base_image" 2>/dev/null)" != "$base_recipe" ]; then
    if [ ! -s "$base_tar" ]; then
        # minbase with merged /usr and without docs, man pages and locales, as Debian's
        # -slim images are made (about 75 MB), and the apt settings of Debian's official
        # images (debuerreotype): without docker-clean, every Dockerfile's `apt-get
        # install` layer kept /var/cache/apt/*.bin and the .debs (~80 MB an image).
        log "making the bookworm base with mmdebstrap (about a minute) -> $base_tar"
        rm -f "$cache"/debian-bookworm-minbase*.tar
        local_apt=$cache/apt.conf.d
        mkdir -p "$local_apt"
        clean='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"'
        printf '%s\n' "DPkg::Post-Invoke { $clean; };" "APT::Update::Post-Invoke { $clean; };" \
            'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' >"$local_apt/docker-clean"
        echo 'Acquire::GzipIndexes "true";' >"$local_apt/docker-gzip-indexes"
        echo 'Acquire::Languages "none";' >"$local_apt/docker-no-languages"
        echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$local_apt/docker-autoremove-suggests"
        as_root mmdebstrap --quiet --variant=minbase --format=tar \
            --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
            --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/groff/*' \
            --dpkgopt='path-exclude=/usr/share/lintian/*' \
            --customize-hook="copy-in $local_apt/docker-clean $local_apt/docker-gzip-indexes $local_apt/docker-no-languages $local_apt/docker-autoremove-suggests /etc/apt/apt.conf.d" \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/apt/* "$1"/var/log/*.log' \
            bookworm "$base_tar.tmp" >"$cache/mmdebstrap.log" 2>&1 \
            || die "mmdebstrap failed: see $cache/mmdebstrap.log"
        mv "$base_tar.tmp" "$base_tar"
    fi
    log "importing $base_tar as $base_image"
    podman import --quiet --change "LABEL dev.mcc.base-recipe=$base_recipe" "$base_tar" "$base_image" >/dev/null
fi

# 3 and 4. Images.
binary_of() {
    case $1 in gateway) echo mcc-gateway;; executor) echo mcc-executor;; operator) echo mcc-operator;; esac
}
dockerfile_of() {
    case $1 in redis) echo "$repo/images/redis/Dockerfile";; *) echo "$repo/$1/Dockerfile";; esac
}

# The runner the pod runtime copies into tool images: no libc, no loader of the image.
static_executor() {
    local out=$target_dir/$static_target/release/mcc-executor
    log "building the static mcc-executor ($static_target, release)"
    (cd "$repo" && CARGO_TARGET_DIR=$target_dir RUSTFLAGS="-C target-feature=+crt-static" \
        cargo build --quiet --release --locked --target "$static_target" -p mcc-executor --bin mcc-executor) \
        || die "the static mcc-executor build failed"
    if readelf -l "$out" | grep -q INTERP || readelf -d "$out" | grep -q NEEDED; then
        die "$out is dynamically linked"
    fi
    echo "$out"
}

stage_context() { # name -> prints the build context directory
    local name=$1 bin src ctx
    if [ "$name" = redis ]; then echo "$repo/images/redis"; return; fi
    bin=$(binary_of "$name")
    if [ "$name" = executor ]; then
        src=$(static_executor)
    elif [ "$name" = gateway ] && [ -n "${MCC_GATEWAY_BINARY:-}" ]; then
        src=$MCC_GATEWAY_BINARY # e.g. scripts/pgo-build.sh's
    else
        src=$target_dir/$profile/$bin
    fi
    [ -x "$src" ] || die "$src is missing: build it first (CARGO_TARGET_DIR=$target_dir cargo build -p $bin --bin $bin)"
    ctx=$cache/stage/$name
    rm -rf "$ctx"
    mkdir -p "$ctx/bin"
    strip -o "$ctx/bin/$bin" "$src"
    if [ "$name" = gateway ]; then
        mkdir -p "$ctx/models"
        if [ "$model" = baked ]; then
            local dir
            dir=$("$repo/scripts/fetch-model.sh")
            cp -R "$dir" "$ctx/models/all-MiniLM-L6-v2"
        fi
    fi
    echo "$ctx"
}

for name in "${images[@]}"; do
    image=localhost/mcc-$name:$tag
    started=$SECONDS
    ctx=$(stage_context "$name")
    old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    args=(--pull=never --runtime runc --network host --layers --quiet
          --build-arg "DEBIAN_IMAGE=$base_image" -f "$(dockerfile_of "$name")" -t "$image")
    if [ "$name" != redis ]; then args+=(--target local); fi
    if [ "$name" = gateway ]; then args+=(--build-arg "MODEL=$model"); fi
    log "building $image"
    buildah bud "${args[@]}" "$ctx" >/dev/null
    new=$(podman image inspect --format '{{.Id}}' "$image")
    # Drop the image this tag replaced (each debug gateway is ~100 MB), if nothing uses it.
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        podman rmi "$old" >/dev/null 2>&1 || true
    fi

    # Starts read-only as a non-root uid, as the pod runs it.
    if [ "$name" = redis ]; then
        check=(--entrypoint redis-server "$image" --version)
    else
        check=("$image" --help)
    fi
    podman run --rm --read-only --user 65532:65532 --network none "${check[@]}" >/dev/null \
        || die "$image does not start read-only as 65532"
    size=$(podman image inspect --format '{{.Size}}' "$image")
    log "$image ok ($((size / 1000000)) MB, $((SECONDS - started)) s)"
done
