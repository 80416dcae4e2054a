#!/usr/bin/env python3
"""Delayed-ACK probe: a keep-alive HTTP/1.1 client that does NOT set TCP_NODELAY calls
`execute` of an echo tool in a legacy MCP session (Mcp-Session-Id, SSE answers), and the
same client calls it statelessly (2026-07-28, plain JSON answers), interleaved, against a
real release gateway. Prints both p50s and their difference (target: within 1 ms).

    cargo build --release -p mcc-gateway && python3 gateway/benches/nodelay_probe.py

Options: --calls N (per series, default 1000), --gateway PATH (default
$CARGO_TARGET_DIR/release/mcc-gateway, else target/release/mcc-gateway). Standard library
only. Python's http.client turns TCP_NODELAY on since 3.x; this client turns it off again,
as many proxies and older clients leave it, so Nagle's algorithm and the peer's delayed
ACKs are in play exactly as the issue describes.
"""
import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time

import gateway_proc


class NagleConnection(http.client.HTTPConnection):
    """http.client with TCP_NODELAY off (Nagle on), keep-alive."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        assert self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0


def post(conn, body, headers):
    data = json.dumps(body).encode()
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers)
    conn.request("POST", "/mcp", body=data, headers=h)
    resp = conn.getresponse()
    raw = resp.read().decode()
    if resp.status not in (200, 202):
        sys.exit(f"HTTP {resp.status}: {raw[:300]}")
    return resp, raw


def reply(raw):
    """The JSON-RPC message of a JSON or SSE body."""
    raw = raw.strip()
    if raw.startswith("{"):
        return json.loads(raw)
    data = [l[5:].strip() for l in raw.splitlines() if l.startswith("data:")]
    return json.loads(next(d for d in reversed(data) if d))


def call_args(i):
    return {"name": "execute", "arguments": {"key": "public.echo", "params": {"msg": f"hi {i}"}}}


def check(message, i):
    text = message["result"]["content"][0]["text"]
    if f"hi {i}" not in text:
        sys.exit(f"unexpected answer: {message}")


def legacy_session(conn):
    _, _ = None, None
    resp, raw = post(conn, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "nodelay-probe", "version": "0"}}}, {})
    sid = resp.getheader("Mcp-Session-Id")
    headers = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return headers


STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "nodelay-probe", "version": "0"},
}
STATELESS_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                     "Mcp-Name": "execute"}


def timed(conn, headers, params, i, content_types):
    t = time.perf_counter()
    resp, raw = post(conn, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}, headers)
    elapsed = time.perf_counter() - t
    content_types.add(resp.getheader("Content-Type", "").split(";")[0])
    check(reply(raw), i)
    return elapsed


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--gateway")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mcc-nodelay-")
    port = gateway_proc.free_port()
    proc = gateway_proc.start(gateway_proc.binary(args.gateway), work, port,
                              "  legacy_sessions: true\n")
    try:
        legacy_conn = NagleConnection("127.0.0.1", port, timeout=30)
        stateless_conn = NagleConnection("127.0.0.1", port, timeout=30)
        legacy_headers = legacy_session(legacy_conn)
        legacy, stateless = [], []
        legacy_types, stateless_types = set(), set()
        for i in range(1, args.calls + 51):
            a = timed(legacy_conn, legacy_headers, call_args(i), i, legacy_types)
            params = dict(call_args(i), _meta=STATELESS_META)
            b = timed(stateless_conn, STATELESS_HEADERS, params, i, stateless_types)
            if i > 50:  # warm-up
                legacy.append(a)
                stateless.append(b)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    lp50, sp50 = pct(legacy, 0.5), pct(stateless, 0.5)
    print(f"# Delayed-ACK probe ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()})\n")
    print(f"client: http.client keep-alive, TCP_NODELAY off; {args.calls} calls per series, "
          "interleaved, after 50 warm-up calls\n")
    print("| series | answer | p50 ms | p90 ms | p99 ms | max ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, xs, types in (("legacy session `execute`", legacy, legacy_types),
                            ("stateless 2026-07-28 `execute`", stateless, stateless_types)):
        print(f"| {name} | {', '.join(sorted(types))} | {pct(xs, 0.5):.3f} | {pct(xs, 0.9):.3f} | "
              f"{pct(xs, 0.99):.3f} | {max(xs) * 1000:.3f} |")
    slow = sum(1 for x in legacy if x > 0.030)
    print(f"\nlegacy p50 - stateless p50 = {lp50 - sp50:+.3f} ms (target: within 1 ms); "
          f"legacy calls over 30 ms: {slow} of {len(legacy)}")
    return 0 if abs(lp50 - sp50) <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
