#!/usr/bin/env python3
"""An upstream MCP server's tool through the gateway against calling it directly (issue
33: within 0.5 ms p50), measured from outside with a client we did not write.

`@modelcontextprotocol/server-everything` (npm, pinned as the tests pin it, streamable
HTTP) serves `echo`. wrk (`wrk/call.lua`, one connection, keep-alive, every answer
checked) calls it

- directly: `tools/call echo` in a legacy session of the upstream's own (its generation);
- through a release gateway in a child process (file mode, `mcp_servers:` naming the
  upstream, dev-admin auth, memory sessions, JSON answers): `execute` of `public.ev_echo`,
  stateless 2026-07-28, and again in a legacy session of the gateway's.

The three series alternate round by round (the order rotates), so all see the same
machine; the overhead of a round is its gateway p50 minus its direct p50. Beside them:
the gateway's own CPU time per call (user + system from /proc).

    cargo build --release -p mcc-gateway && python3 gateway/benches/upstream_floor.py

Options: --rounds N (default 5), --seconds S per wrk run (default 8), --gateway PATH.
Needs wrk, node and npm (the package is installed under ~/.cache/mcc-upstream, as the
tests do). Prints a markdown report; results go to RESULTS-upstream.md.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import gateway_proc

EVERYTHING_VERSION = "2026.8.31"  # gateway/tests/it/upstream_support/mod.rs pins the same
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "mcc-upstream")
ENTRY = os.path.join(CACHE, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
MESSAGE = "bench"


def ensure_everything():
    package = os.path.join(os.path.dirname(os.path.dirname(ENTRY)), "package.json")
    try:
        installed = json.load(open(package)).get("version")
    except OSError:
        installed = None
    if installed != EVERYTHING_VERSION or not os.path.exists(ENTRY):
        subprocess.run(["npm", "install", "--silent", "--prefix", CACHE,
                        f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"], check=True)


def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers, r.read().decode()


def legacy_session(url):
    """A legacy MCP session at `url` (initialize, then initialized): its Mcp-Session-Id."""
    headers, _ = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "wrk", "version": "0"}}}, {})
    session = headers["Mcp-Session-Id"]
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    return session


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server-everything did not listen on {port}")


def wrk(url, seconds, tool, arguments, session=None):
    v = gateway_proc.wrk(url, 1, 1, seconds, "call.lua", env={
        "MCC_WRK_TOOL": tool, "MCC_WRK_ARGS": json.dumps(arguments),
        "MCC_WRK_EXPECT": f"Echo: {MESSAGE}", "MCC_WRK_SESSION": session or ""})
    return {"p50": v["p50_us"] / 1000, "p99": v["p99_us"] / 1000, "calls": v["requests"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--gateway")
    args = ap.parse_args()
    ensure_everything()
    work = tempfile.mkdtemp(prefix="mcc-upstream-floor-")
    up_port, gw_port = gateway_proc.free_port(), gateway_proc.free_port()
    node = subprocess.Popen(["node", ENTRY, "streamableHttp"], env=dict(os.environ, PORT=str(up_port)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gateway = None
    try:
        wait_port(up_port)
        up_url, gw_url = f"http://127.0.0.1:{up_port}/mcp", f"http://127.0.0.1:{gw_port}/mcp"
        more = (f"mcp_servers:\n  - name: everything\n    url: {up_url}\n    groups: [public]\n"
                "    prefix: ev_\n    include: [echo]\n")
        gateway = gateway_proc.start(gateway_proc.binary(args.gateway), work, gw_port, more_tools=more)
        direct = (up_url, "echo", {"message": MESSAGE}, legacy_session(up_url))
        execute = {"key": "public.ev_echo", "params": {"message": MESSAGE}}
        series = {
            "directly (legacy session)": direct,
            "gateway, 2026-07-28": (gw_url, "execute", execute, None),
            "gateway, legacy session": (gw_url, "execute", execute, legacy_session(gw_url)),
        }
        # The upstream's tools are discovered after /readyz: wait for the first answer.
        for _ in range(100):
            _, body = post(gw_url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "execute", "arguments": execute, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}},
                {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute"})
            if f"Echo: {MESSAGE}" in body:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"the gateway never served public.ev_echo: {body[:300]}")
        for name, s in series.items():  # warm-up
            wrk(s[0], 2, *s[1:])
        names = list(series)
        rows = []
        for r in range(args.rounds):
            order = names[r % 3:] + names[:r % 3]
            got = {}
            for name in order:
                before = gateway_proc.cpu_seconds(gateway.pid)
                got[name] = wrk(series[name][0], args.seconds, *series[name][1:])
                got[name]["cpu_us"] = (gateway_proc.cpu_seconds(gateway.pid) - before) / got[name]["calls"] * 1e6
            rows.append(got)
        report(rows, names, args)
    finally:
        if gateway:
            gateway.kill()
        node.kill()


def report(rows, names, args):
    direct, modern, legacy = names
    print(f"Machine: {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.rounds} rounds of "
          f"{args.seconds} s per series, wrk -t1 -c1\n")
    print("| round | directly p50 ms | 2026-07-28 p50 ms | overhead ms | legacy p50 ms | overhead ms "
          "| directly p99 | 2026-07-28 p99 | legacy p99 | gateway CPU µs/call (2026-07-28, legacy) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, g in enumerate(rows, 1):
        print(f"| {i} | {g[direct]['p50']:.3f} | {g[modern]['p50']:.3f} | "
              f"{g[modern]['p50'] - g[direct]['p50']:.3f} | {g[legacy]['p50']:.3f} | "
              f"{g[legacy]['p50'] - g[direct]['p50']:.3f} | {g[direct]['p99']:.3f} | "
              f"{g[modern]['p99']:.3f} | {g[legacy]['p99']:.3f} | "
              f"{g[modern]['cpu_us']:.0f}, {g[legacy]['cpu_us']:.0f} |")
    for name in (modern, legacy):
        over = statistics.median(g[name]["p50"] - g[direct]["p50"] for g in rows)
        verdict = "met" if over <= 0.5 else "missed"
        print(f"\n{name}: median p50 overhead {over:.3f} ms (target ≤ 0.5 ms): {verdict}")


if __name__ == "__main__":
    main()
