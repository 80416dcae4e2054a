#!/usr/bin/env bash
# A profile-guided (PGO) release build of mcc-gateway:
#
#   scripts/pgo-build.sh        # prints the path of the optimized binary
#
# On 2 cores it costs two release builds (~30 min for both) and a training run of seconds; the
# gateway it gives spends about a third less CPU per `execute` and answers ~9% sooner than
# the plain release build (gateway/benches/RESULTS-execute-floor.md, run 10). Steps:
#  1. llvm-profdata from rustup's llvm-tools component (added when missing: it must match
#     rustc's LLVM);
#  2. an instrumented release build (-Cprofile-generate) in its own target directory
#     ($MCC_PGO_CACHE/gen: its RUSTFLAGS would otherwise rebuild the plain one's crates);
#  3. gateway/benches/pgo_train.py drives it (stateless execute, whoami and search, eight
#     connections at once, legacy sessions); the gateway writes its profile when it exits;
#  4. llvm-profdata merges that profile (only the gateway's: the build scripts of step 2
#     write profiles of their own elsewhere);
#  5. the release build again with -Cprofile-use, in $MCC_PGO_CACHE/use. The merged profile
#     is named by its hash, so RUSTFLAGS change exactly when the profile does and cargo
#     rebuilds every crate with it (cargo does not track a file named in RUSTFLAGS).
# The result: $MCC_PGO_CACHE/mcc-gateway (default cache: ~/.cache/mcc-pgo). The same source
# gives the same program as `cargo build --release`; only the layout and inlining differ.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${MCC_PGO_CACHE:-$HOME/.cache/mcc-pgo}
log() { echo "pgo-build.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# 1.
tools=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin
if [ ! -x "$tools/llvm-profdata" ]; then
    log "adding rustup's llvm-tools component (llvm-profdata)"
    rustup component add llvm-tools >&2 || die "llvm-tools could not be added: no llvm-profdata"
fi
profdata=$tools/llvm-profdata
[ -x "$profdata" ] || die "$profdata is missing"

build() { # target dir, RUSTFLAGS
    (cd "$repo" && CARGO_TARGET_DIR=$1 RUSTFLAGS=$2 \
        cargo build --quiet --release --locked -p mcc-gateway --bin mcc-gateway) \
        || die "the release build in $1 failed"
}

# 2.
rm -rf "$cache/build-profiles" # what step 2's build scripts wrote last time
mkdir -p "$cache"
log "instrumented build ($cache/gen)"
build "$cache/gen" "-Cprofile-generate=$cache/build-profiles"

# 3.
rm -rf "$cache/train" && mkdir -p "$cache/train"
log "training run"
LLVM_PROFILE_FILE=$cache/train/gateway-%p.profraw \
    python3 "$repo/gateway/benches/pgo_train.py" "$cache/gen/release/mcc-gateway" \
    || die "the training run failed"
compgen -G "$cache/train/gateway-*.profraw" >/dev/null || die "the gateway wrote no profile"

# 4.
"$profdata" merge -o "$cache/train/merged.profdata" "$cache/train"/gateway-*.profraw
hash=$(sha256sum "$cache/train/merged.profdata" | cut -c1-16)
merged=$cache/gateway-$hash.profdata
mv "$cache/train/merged.profdata" "$merged"
find "$cache" -maxdepth 1 -name 'gateway-*.profdata' ! -path "$merged" -delete

# 5.
log "optimized build ($cache/use, profile $merged)"
build "$cache/use" "-Cprofile-use=$merged"
cp "$cache/use/release/mcc-gateway" "$cache/mcc-gateway"
echo "$cache/mcc-gateway"
