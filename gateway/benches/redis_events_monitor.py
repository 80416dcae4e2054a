"""Redis commands per legacy MCP `execute` call, counted with MONITOR: a private
redis-server (a free port), one gateway keeping its sessions there (gateway_proc.py: one
echo tool, dev-admin), and one official MCP Python SDK client in a legacy session
(`Mcp-Session-Id`) that calls `execute` public.echo N times while `redis-cli MONITOR`
records. Prints commands per call, split into those a client sent (each one a round trip
unless pipelined) and those run inside scripts (`[0 lua]`), and per command name.

    python3 gateway/benches/redis_events_monitor.py [--calls 50] [--gateway PATH]

Needs redis-server, redis-cli (Debian packages) and `pip install "mcp>=2.3"`."""
import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time

from mcp.client.client import Client

sys.path.insert(0, os.path.dirname(__file__))
import gateway_proc  # noqa: E402
import redis_load  # noqa: E402


async def calls(port, n, monitor_port, work):
    url = f"http://127.0.0.1:{port}/mcp"
    async with Client(url, mode="legacy") as client:
        for _ in range(3):  # warm: session restored, connections open
            await client.call_tool("execute", {"key": "public.echo", "params": {"msg": "w"}})
        log = open(os.path.join(work, "monitor"), "w")
        mon = subprocess.Popen(["redis-cli", "-p", str(monitor_port), "MONITOR"],
                               stdout=log, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for i in range(n):
            got = await client.call_tool(
                "execute", {"key": "public.echo", "params": {"msg": f"m{i}"}})
            text = "".join(getattr(c, "text", "") for c in got.content)
            if got.is_error or text.strip() != f"m{i}":
                sys.exit(f"execute: unexpected answer {text!r}")
        time.sleep(0.5)
        mon.terminate()
        mon.wait()
        log.close()
    return open(os.path.join(work, "monitor")).read().splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--gateway", help="gateway binary (default: the release build)")
    args = ap.parse_args()
    binary = gateway_proc.binary(args.gateway)
    with tempfile.TemporaryDirectory() as work:
        procs = []
        try:
            url, (rport,) = redis_load.single(work, procs)
            os.environ["REDIS_URL"] = url
            gport = gateway_proc.free_port()
            procs.append(gateway_proc.start(binary, work, gport))
            lines = asyncio.run(calls(gport, args.calls, rport, work))
        finally:
            for p in procs:
                p.kill()
    events = [l for l in lines if l[:1].isdigit() and '"' in l]
    by_name = collections.Counter()
    sent = inner = 0
    for l in events:
        source = l.split("[", 1)[1].split("]", 1)[0]
        name = l.split('"', 2)[1].upper()
        if "lua" in source:
            inner += 1
            by_name[f"{name} (in script)"] += 1
        else:
            sent += 1
            by_name[name] += 1
    n = args.calls
    print(f"{n} legacy execute calls: {len(events) / n:.2f} commands per call "
          f"({sent / n:.2f} sent by the gateway, {inner / n:.2f} inside scripts)")
    for name, count in sorted(by_name.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28} {count / n:.2f}")


if __name__ == "__main__":
    main()
