"""Legacy MCP sessions (Mcp-Session-Id) held in each Redis deployment, driven by the
official MCP Python SDK: one release gateway per deployment (one server, Sentinel,
Cluster: started by redis_load.py's `deployments`), N concurrent SDK clients that each
initialize a legacy session, then loop `execute` public.echo, `set_session` and
`get_session` (the value read must be the one just set). Rounds interleave the three
deployments so all see the same machine; prints loops/s, p50/p99 per call and the ratio
to one server, and the CPU time the gateway (with the tool runs it reaped) and the SDK
clients spent per loop: less sensitive than throughput to other work on the machine.

    cargo build --release -p mcc-gateway
    python3 gateway/benches/redis_sdk_load.py [--seconds 8] [--rounds 3] [--clients 8]

Needs redis-server, redis-cli (Debian packages) and `pip install "mcp>=2.3"`."""
import argparse
import asyncio
import os
import sys
import time

from mcp.client.client import Client

sys.path.insert(0, os.path.dirname(__file__))
import gateway_proc  # noqa: E402
import redis_load  # noqa: E402

CALLS = ("initialize", "execute", "set_session", "get_session")


def text(result):
    if result.is_error:
        raise RuntimeError("".join(getattr(c, "text", "") for c in result.content))
    return "".join(getattr(c, "text", "") for c in result.content)


async def client_loop(url, me, until, latencies, counts):
    """One SDK client: initialize, then execute/set/get until `until` (monotonic)."""
    t = time.perf_counter()
    async with Client(url, mode="legacy") as client:
        latencies["initialize"].append(time.perf_counter() - t)
        i = 0
        while time.perf_counter() < until:
            i += 1
            steps = (
                ("execute", {"key": "public.echo", "params": {"msg": f"c{me}"}}, f"c{me}"),
                ("set_session", {"name": "n", "value": i}, "Set 'n'."),
                ("get_session", {"name": "n"}, str(i)),
            )
            for tool, args, expected in steps:
                t = time.perf_counter()
                got = text(await client.call_tool(tool, args))
                latencies[tool].append(time.perf_counter() - t)
                if got.strip() != expected:
                    raise RuntimeError(f"{tool}: expected {expected!r}, got {got!r}")
            counts["loops"] += 1


async def one_round(port, seconds, clients):
    """Loops completed and the per-call latencies of `clients` SDK clients for `seconds`."""
    url = f"http://127.0.0.1:{port}/mcp"
    latencies = {c: [] for c in CALLS}
    counts = {"loops": 0}
    until = time.perf_counter() + seconds
    await asyncio.gather(*(client_loop(url, me, until, latencies, counts)
                           for me in range(clients)))
    return counts["loops"], latencies


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))] * 1000 if s else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--gateway")
    a = ap.parse_args()
    with redis_load.deployments(gateway_proc.binary(a.gateway)) as gateways:
        rates = {name: [] for name in gateways}
        latencies = {name: {c: [] for c in CALLS} for name in gateways}
        per_loop = {name: [] for name in gateways}
        cpu = {name: [0.0, 0.0, 0] for name in gateways}  # gateway s, client s, loops
        for _ in range(a.rounds):
            for name, (port, proc, data) in gateways.items():
                before = redis_load.commands(data)
                gw_cpu, client_cpu = gateway_proc.cpu_seconds(proc.pid, children=True), time.process_time()
                started = time.perf_counter()
                loops, lat = asyncio.run(one_round(port, a.seconds, a.clients))
                wall = time.perf_counter() - started
                cpu[name][0] += gateway_proc.cpu_seconds(proc.pid, children=True) - gw_cpu
                cpu[name][1] += time.process_time() - client_cpu
                cpu[name][2] += loops
                if not loops:
                    sys.exit(f"{name}: no loop completed")
                rates[name].append(loops / wall)
                per_loop[name].append((redis_load.commands(data) - before) / loops)
                for c in CALLS:
                    latencies[name][c] += lat[c]
        base = sum(rates["one server"]) / len(rates["one server"])
        base_p = {c: (percentile(latencies["one server"][c], 50),
                      percentile(latencies["one server"][c], 99)) for c in CALLS}
        print(f"| Redis deployment | loops/s per round ({a.rounds} × {a.seconds} s, "
              f"{a.clients} clients) | mean | ratio to one server | "
              "gateway CPU ms per loop | SDK client CPU ms per loop | "
              "Redis commands per loop (all data nodes, replication included) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, rs in rates.items():
            mean = sum(rs) / len(rs)
            cmds = sum(per_loop[name]) / len(per_loop[name])
            gw_ms, client_ms = (1000 * cpu[name][i] / cpu[name][2] for i in (0, 1))
            print(f"| {name} | {', '.join(f'{r:.0f}' for r in rs)} | {mean:.0f} | "
                  f"{mean / base:.2f} | {gw_ms:.2f} | {client_ms:.2f} | {cmds:.1f} |")
        print("\n| Redis deployment | call | calls | p50 ms (ratio) | p99 ms (ratio) |")
        print("| --- | --- | --- | --- | --- |")
        for name in gateways:
            for c in CALLS:
                p50, p99 = (percentile(latencies[name][c], p) for p in (50, 99))
                print(f"| {name} | {c} | {len(latencies[name][c])} | "
                      f"{p50:.1f} ({p50 / base_p[c][0]:.2f}) | "
                      f"{p99:.1f} ({p99 / base_p[c][1]:.2f}) |")


if __name__ == "__main__":
    main()
