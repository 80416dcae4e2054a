"""Stateless `execute` throughput of one release gateway with its sessions in each Redis
deployment: one server, Sentinel (master + 2 replicas + 3 sentinels) and a Redis
Cluster (3 masters + 3 replicas), all real `redis-server` processes on loopback ports.
wrk (gateway/benches/wrk/execute.lua) drives each in turn, rounds interleaved so all
three see the same machine; prints throughput and the ratio to one server.
`deployments` (the Redis topologies and their gateways) is shared with redis_sdk_load.py.

    cargo build --release -p mcc-gateway
    python3 gateway/benches/redis_load.py [--seconds 8] [--rounds 2] [--connections 8]

Needs redis-server, redis-cli and wrk (Debian packages). Standard library only."""
import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import gateway_proc  # noqa: E402


def redis(work, name, port, *args):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    return subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", d, "--repl-diskless-sync-delay", "0", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True).stdout


def wait_for(check, what):
    for _ in range(300):
        if check():
            return
        time.sleep(0.1)
    sys.exit(f"{what}: not ready after 30 s")


def ports(n):
    return [gateway_proc.free_port() for _ in range(n)]


def commands(data_ports):
    """Commands the data nodes have processed so far (to show the calls reach Redis)."""
    total = 0
    for p in data_ports:
        m = re.search(r"total_commands_processed:(\d+)", cli(p, "INFO", "stats"))
        total += int(m.group(1)) if m else 0
    return total


def single(work, procs):
    (p,) = ports(1)
    procs.append(redis(work, "single", p))
    wait_for(lambda: "PONG" in cli(p, "PING"), "single")
    return f"redis://127.0.0.1:{p}", [p]


def sentinel(work, procs):
    m, r1, r2, s1, s2, s3 = ports(6)
    procs.append(redis(work, "master", m))
    wait_for(lambda: "PONG" in cli(m, "PING"), "master")
    for i, r in enumerate((r1, r2)):
        procs.append(redis(work, f"replica{i}", r, "--replicaof", "127.0.0.1", str(m)))
    for i, s in enumerate((s1, s2, s3)):
        conf = os.path.join(work, f"sentinel{i}.conf")
        with open(conf, "w") as f:
            f.write(f"port {s}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 {m} 2\n"
                    "sentinel down-after-milliseconds mymaster 1000\n")
        procs.append(subprocess.Popen(["redis-server", conf, "--sentinel"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_for(lambda: "connected_slaves:2" in cli(m, "INFO", "replication")
             and all("slave" in cli(s, "SENTINEL", "REPLICAS", "mymaster") for s in (s1, s2, s3)),
             "sentinel")
    return (f"redis+sentinel://127.0.0.1:{s1},127.0.0.1:{s2},127.0.0.1:{s3}/mymaster",
            [m, r1, r2])


def cluster(work, procs):
    ps = ports(12)
    nodes, buses = ps[:6], ps[6:]
    for i, (p, b) in enumerate(zip(nodes, buses)):
        procs.append(redis(work, f"node{i}", p, "--cluster-enabled", "yes",
                           "--cluster-port", str(b), "--cluster-node-timeout", "1000",
                           "--cluster-config-file", os.path.join(work, f"node{i}", "nodes.conf")))
    wait_for(lambda: all("PONG" in cli(p, "PING") for p in nodes), "cluster nodes")
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in nodes],
                    "--cluster-replicas", "1", "--cluster-yes"], check=True,
                   stdout=subprocess.DEVNULL)
    wait_for(lambda: all("cluster_state:ok" in cli(p, "CLUSTER", "INFO") for p in nodes),
             "cluster")
    return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in nodes[:3]), nodes


@contextlib.contextmanager
def deployments(binary):
    """The three Redis deployments, each with a release gateway keeping its sessions
    there: yields {name: (gateway port, gateway process, data-node ports)}, one server
    first (the base of the ratios); stops every process on exit."""
    procs, gateways = [], {}
    with tempfile.TemporaryDirectory() as work:
        try:
            for name, make in (("one server", single), ("Sentinel", sentinel),
                               ("Cluster", cluster)):
                url, data = make(os.path.join(work, name.replace(" ", "-")), procs)
                gw_work = os.path.join(work, f"gw-{len(gateways)}")
                os.makedirs(gw_work)
                port = gateway_proc.free_port()
                os.environ["REDIS_URL"] = url
                gateways[name] = (port, gateway_proc.start(binary, gw_work, port), data)
            yield gateways
        finally:
            for _, proc, _ in gateways.values():
                proc.kill()
            for p in procs:
                p.kill()


def wrk(port, seconds, connections):
    script = os.path.join(os.path.dirname(__file__), "wrk", "execute.lua")
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script,
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True).stdout
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not rate:
        sys.exit(f"wrk gave no rate:\n{out}")
    return float(rate.group(1)), int(errors.group(1)) if errors else 0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--gateway")
    a = ap.parse_args()
    with deployments(gateway_proc.binary(a.gateway)) as gateways:
        rates = {name: [] for name in gateways}
        per_call = {name: [] for name in gateways}
        for _ in range(a.rounds):
            for name, (port, _, data) in gateways.items():
                before = commands(data)
                rate, errors, out = wrk(port, a.seconds, a.connections)
                if errors:
                    sys.exit(f"{name}: {errors} errors\n{out}")
                rates[name].append(rate)
                per_call[name].append((commands(data) - before) / (rate * a.seconds))
        base = sum(rates["one server"]) / len(rates["one server"])
        print(f"| Redis deployment | execute/s per round ({a.rounds} × {a.seconds} s, "
              f"{a.connections} connections) | mean | ratio to one server | "
              "Redis commands per execute (all data nodes, replication included) |")
        print("| --- | --- | --- | --- | --- |")
        for name, rs in rates.items():
            mean = sum(rs) / len(rs)
            cmds = sum(per_call[name]) / len(per_call[name])
            print(f"| {name} | {', '.join(f'{r:.0f}' for r in rs)} | {mean:.0f} | "
                  f"{mean / base:.2f} | {cmds:.1f} |")


if __name__ == "__main__":
    main()
