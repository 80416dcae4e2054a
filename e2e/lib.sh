# Shared by e2e/pod.sh and e2e/image-report.sh: sourced from the repository root, after
# `set -euo pipefail`. Defines functions only; nothing runs on sourcing.

# HELM: helm from PATH, else fetched once by scripts/ensure-helm.sh (exported).
e2e_helm() {
    HELM=${HELM:-$(command -v helm || scripts/ensure-helm.sh)}
    export HELM
}

# python: an interpreter with pyyaml and the `mcp` SDK >= 2.3 (e2e/pod_e2e.py imports it):
# the system python3 when it has them, else a venv in $1 (the images cache).
e2e_python() {
    local cache=$1
    python=python3
    if ! "$python" -c 'import sys, yaml, mcp.client.client; from importlib.metadata import version; v = tuple(int(x) for x in version("mcp").split(".")[:2]); sys.exit(v < (2, 3))' 2>/dev/null; then
        if [ ! -x "$cache/venv/bin/python" ]; then
            python3 -m venv "$cache/venv"
        fi
        "$cache/venv/bin/pip" install --quiet "mcp>=2.3" pyyaml
        python=$cache/venv/bin/python
    fi
}
