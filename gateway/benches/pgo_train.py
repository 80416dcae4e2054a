#!/usr/bin/env python3
"""The training run of a profile-guided build (scripts/pgo-build.sh): drives an
instrumented gateway through the paths a deployment serves most, so that the profile it
writes at exit says what is hot. The bench's config (gateway_proc.py: one echo tool,
dev-admin auth, in-memory sessions, keyword search): stateless 2026-07-28 `execute`,
`whoami` and `search` on keep-alive connections, the same from eight connections at
once, and legacy sessions (initialize, then calls in the session). Every answer is
checked. Standard library only.

    LLVM_PROFILE_FILE=… python3 gateway/benches/pgo_train.py INSTRUMENTED_GATEWAY [--calls N]
"""
import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading

import gateway_proc

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pgo-train", "version": "0"}}

CALLS = [
    ("execute", {"key": "public.echo", "params": {"msg": "hello"}}, "hello"),
    ("whoami", {}, "bench"),
    ("search", {"query": "echo a message"}, "public.echo"),
]


def post(conn, body, headers):
    conn.request("POST", "/mcp", body=json.dumps(body), headers={
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read().decode()


def stateless(port, calls):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(calls):
        tool, arguments, expected = CALLS[i % len(CALLS)]
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": META}}
        status, _, text = post(conn, body, {"MCP-Protocol-Version": "2026-07-28",
                                            "Mcp-Method": "tools/call", "Mcp-Name": tool})
        if status != 200 or expected not in text:
            sys.exit(f"{tool}: {status} {text[:300]}")


def legacy(port, calls):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "pgo-train", "version": "0"}}}
    status, headers, text = post(conn, init, {})
    session = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
    if status != 200 or not session:
        sys.exit(f"initialize: {status} {text[:300]}")
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    for i in range(1, calls + 1):
        tool, arguments, expected = CALLS[i % len(CALLS)]
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}
        status, _, text = post(conn, body, headers)
        if status != 200 or expected not in text:
            sys.exit(f"legacy {tool}: {status} {text[:300]}")


def in_parallel(work, port, calls, threads=8):
    errors = []

    def run():
        try:
            work(port, calls)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        sys.exit(f"{work.__name__}: {errors[0]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gateway")
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mcc-pgo-train-")
    port = gateway_proc.free_port()
    proc = gateway_proc.start(args.gateway, work, port)
    try:
        stateless(port, args.calls)
        in_parallel(stateless, port, args.calls // 8)
        for _ in range(10):
            legacy(port, args.calls // 10)
    finally:
        # The profile is written when the process exits: a graceful stop (SIGTERM).
        proc.terminate()
        code = proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    if code != 0:
        sys.exit(f"the gateway exited with {code}: its profile may be missing")
    print(f"pgo_train.py: {args.calls * 2 + (args.calls // 10) * 10} calls", file=sys.stderr)


if __name__ == "__main__":
    main()
