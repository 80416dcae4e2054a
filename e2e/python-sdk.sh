#!/usr/bin/env bash
# The gateway on README's embedded default (the tool files in examples/, in-memory
# sessions, dev-admin auth on loopback) driven by the official MCP Python SDK in both
# protocol generations (e2e/mcp_python_sdk.py: MCC's exact texts for every tool and
# prompt, sessions, elicitation), plus approval before a tool runs on `admin.tool_env`
# (the gateway is started with `execution.approval.groups: [admin]`).
#
# The gateway is the debug binary in $CARGO_TARGET_DIR (MCC_GATEWAY_BIN to choose another);
# the SDK comes from the system python3 or a venv in ~/.cache/mcc-pysdk (PyPI, once).
#
#   e2e/python-sdk.sh --fetch   make sure the SDK is there; exit 1 when PyPI cannot give it
#   e2e/python-sdk.sh           run the checks; exit 1 when one fails
set -euo pipefail
cd "$(dirname "$0")/.."
source e2e/lib.sh

CACHE="${MCC_PYSDK_CACHE:-$HOME/.cache/mcc-pysdk}"
if [ "${1:-}" = "--fetch" ]; then
    e2e_python "$CACHE" >/dev/null 2>&1
    exit
fi
e2e_python "$CACHE"

BIN="${MCC_GATEWAY_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}/debug/mcc-gateway}"
[ -x "$BIN" ] || { echo "python-sdk: no gateway binary at $BIN (build it first)" >&2; exit 1; }

# A free loopback port, chosen by the kernel.
PORT=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
gateway_pid=
cleanup() {
    [ -n "$gateway_pid" ] && kill "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null
    rm -f "$log"
}
trap cleanup EXIT

# Exactly README's first command, on another port and with approval for admin tools.
MCC_SERVER__HOST=127.0.0.1 MCC_SERVER__PORT=$PORT MCC_EXECUTION__APPROVAL__GROUPS=admin \
    "$BIN" serve >"$log" 2>&1 &
gateway_pid=$!
for _ in $(seq 300); do
    "$python" - "$PORT" <<'EOF' 2>/dev/null && break
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=1)
EOF
    kill -0 "$gateway_pid" 2>/dev/null || { echo "python-sdk: the gateway exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.2
done

if ! "$python" e2e/mcp_python_sdk.py --url "http://127.0.0.1:$PORT/mcp" \
        --approval-key admin.tool_env; then
    echo "python-sdk: the gateway's log:" >&2
    tail -n 50 "$log" >&2
    exit 1
fi
