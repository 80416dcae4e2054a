#!/usr/bin/env python3
"""Execute against the spawn floor (issue 14, target 2), measured from outside the process
with clients we did not write: a release gateway serves `execute` of an echo tool over MCP
(stateless 2026-07-28, plain JSON answers) to wrk on keep-alive connections, and the floor
is the same `sh -c 'echo hello'` spawned bare, in the same run, interleaved round by round:

- one connection: wrk -t1 -c1, against hyperfine -N (sequential bare spawns, no shell);
- eight connections: wrk -t2 -c8 throughput, against 8 concurrent bare spawns (GNU xargs -P 8).

Beside them, for where the time goes: `whoami` through the same wrk path (MCP over HTTP
without a tool run), the gateway's own CPU time per one-connection `execute` (user plus
system, from /proc; the tool processes' CPU is not in it) and, with --http-floor, the same
spawn behind plain HTTP (`examples/http_spawn_floor.rs`: axum and the executor's
`process::run`, no MCP, auth, catalog or engine).

    cargo build --release -p mcc-gateway && python3 gateway/benches/execute_floor.py
    cargo build --release -p mcc-gateway --example http_spawn_floor   # for --http-floor

Options: --rounds N (default 3), --seconds S per wrk run (default 10), --gateway PATH,
--http-floor [PATH] (default: the example next to the release gateway).
Needs wrk, hyperfine and GNU xargs (Debian: apt-get install wrk hyperfine). Prints a
markdown report; results with machine and date go to RESULTS-execute-floor.md.
"""
import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import gateway_proc

ECHO = ["sh", "-c", "echo hello"]


def check_answer(port):
    """One call through urllib, the one wrk/execute.lua repeats: the answer must carry the
    echo (wrk checks every answer of the run the same way)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"key": "public.echo", "params": {"msg": "hello"}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "0"}}}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream",
                                          "MCP-Protocol-Version": "2026-07-28",
                                          "Mcp-Method": "tools/call", "Mcp-Name": "execute"})
    answer = json.load(urllib.request.urlopen(req, timeout=10))
    if "hello" not in answer["result"]["content"][0]["text"] or answer["result"].get("isError"):
        sys.exit(f"unexpected answer: {answer}")


def wrk(port, threads, connections, seconds, tool="execute"):
    v = gateway_proc.wrk(f"http://127.0.0.1:{port}/mcp", threads, connections, seconds,
                         env={"MCC_WRK_TOOL": tool})
    return {"p50": v["p50_us"] / 1000, "p90": v["p90_us"] / 1000, "p99": v["p99_us"] / 1000,
            "rate": v["requests"] / (v["duration_us"] / 1e6), "calls": v["requests"]}


def one_connection(proc, port, seconds, tool="execute"):
    """wrk -t1 -c1 against the gateway `proc`, with the gateway's own CPU per call
    (`cpu_us`) beside wrk's figures."""
    before = gateway_proc.cpu_seconds(proc.pid)
    run = wrk(port, 1, 1, seconds, tool=tool)
    run["cpu_us"] = (gateway_proc.cpu_seconds(proc.pid) - before) / run["calls"] * 1e6
    return run


def spawn_sequential(runs):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run(["hyperfine", "-N", "--warmup", "100", "--runs", str(runs),
                        "--export-json", f.name, "--style", "none", " ".join(
                            ECHO[:2] + [f"'{ECHO[2]}'"])],
                       check=True, capture_output=True)
        times = json.load(open(f.name))["results"][0]["times"]
    times.sort()
    return {"p50": statistics.median(times) * 1000,
            "p90": times[int(len(times) * 0.9)] * 1000,
            "p99": times[int(len(times) * 0.99)] * 1000, "rate": 1 / statistics.mean(times),
            "calls": len(times)}


def spawn_concurrent(spawns, parallel=8):
    started = time.perf_counter()
    subprocess.run(["xargs", "-P", str(parallel), "-I{}"] + ECHO,
                   input="\n".join(map(str, range(spawns))) + "\n", text=True, check=True,
                   stdout=subprocess.DEVNULL)
    return {"rate": spawns / (time.perf_counter() - started), "calls": spawns}


def wait_listening(port, seconds=10):
    """Returns once something accepts connections on `port`, else exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--gateway")
    ap.add_argument("--http-floor", nargs="?", const="", default=None)
    args = ap.parse_args()
    for tool in ("wrk", "hyperfine", "xargs"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (Debian: apt-get install wrk hyperfine)")
    work = tempfile.mkdtemp(prefix="mcc-execute-floor-")
    port = gateway_proc.free_port()
    gateway = gateway_proc.binary(args.gateway)
    proc = gateway_proc.start(gateway, work, port)
    floor_proc, floor_port = None, None
    if args.http_floor is not None:
        floor_bin = args.http_floor or os.path.join(os.path.dirname(gateway), "examples",
                                                    "http_spawn_floor")
        if not os.path.exists(floor_bin):
            sys.exit(f"{floor_bin}: cargo build --release -p mcc-gateway --example http_spawn_floor")
        floor_port = gateway_proc.free_port()
        floor_proc = subprocess.Popen([floor_bin, f"127.0.0.1:{floor_port}"])
        wait_listening(floor_port)
    rows = []
    try:
        check_answer(port)
        wrk(port, 1, 1, 2)  # warm-up
        for _ in range(args.rounds):
            one_floor = spawn_sequential(3000)
            one = one_connection(proc, port, args.seconds)
            one["whoami_p50"] = wrk(port, 1, 1, max(2, args.seconds // 2), tool="whoami")["p50"]
            one["http_floor_p50"] = (wrk(floor_port, 1, 1, max(2, args.seconds // 2))["p50"]
                                     if floor_port else None)
            eight_floor = spawn_concurrent(8000)
            eight = wrk(port, 2, 8, args.seconds)
            rows.append((one_floor, one, eight_floor, eight))
    finally:
        for p in (proc, floor_proc):
            if p:
                p.terminate()
                p.wait(timeout=10)

    print(f"# Execute against the spawn floor ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} "
          f"UTC, {platform.machine()}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f})\n")
    print("| round | bare spawn p50 ms | execute p50 ms | p50 ratio (≤ 1.3) | execute p99 ms "
          "| whoami p50 ms | HTTP + spawn p50 ms | gateway CPU µs per execute "
          "| 8 bare spawns /s | 8 conns execute /s | throughput ratio (≥ 0.75) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (f1, e1, f8, e8) in enumerate(rows, 1):
        print(f"| {i} | {f1['p50']:.3f} | {e1['p50']:.3f} | {e1['p50'] / f1['p50']:.2f} | "
              f"{e1['p99']:.3f} | {e1['whoami_p50']:.3f} | "
              f"{'–' if e1['http_floor_p50'] is None else format(e1['http_floor_p50'], '.3f')} | "
              f"{e1['cpu_us']:.0f} | "
              f"{f8['rate']:.0f} | {e8['rate']:.0f} | {e8['rate'] / f8['rate']:.2f} |")
    p50_ratio = statistics.median(e1["p50"] / f1["p50"] for f1, e1, _, _ in rows)
    rate_ratio = statistics.median(e8["rate"] / f8["rate"] for _, _, f8, e8 in rows)
    print(f"\nmedian over rounds: p50 ratio {p50_ratio:.2f}, throughput ratio {rate_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
