#!/usr/bin/env python3
"""Two gateway binaries against each other on the one-connection `execute` of
execute_floor.py: each round starts a fresh gateway of each binary (A, then B, alternating
which goes first) with the bench's config and drives it with `wrk -t1 -c1`; the report
gives every round's p50 and the gateway's own CPU per call, and the medians. Differences
smaller than a whole harness run can resolve on a noisy VM show up here, since A and B
meet the same drift of the machine round by round.

    python3 gateway/benches/execute_ab.py A_BINARY B_BINARY [--rounds 6] [--seconds 4] [--tool execute]

Needs wrk. Standard library only.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

import execute_floor
import gateway_proc


def measure(binary, seconds, tool):
    work = tempfile.mkdtemp(prefix="mcc-execute-ab-")
    port = gateway_proc.free_port()
    proc = gateway_proc.start(binary, work, port)
    try:
        execute_floor.check_answer(port)
        execute_floor.wrk(port, 1, 1, 1, tool=tool)  # warm-up
        return execute_floor.one_connection(proc, port, seconds, tool)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--tool", default="execute", choices=["execute", "whoami"])
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    rows = []
    for i in range(args.rounds):
        order = [("a", args.a), ("b", args.b)]
        if i % 2:
            order.reverse()
        row = {name: measure(binary, args.seconds, args.tool) for name, binary in order}
        rows.append(row)
        print(f"round {i + 1}: A p50 {row['a']['p50']:.3f} ms, {row['a']['cpu_us']:.0f} µs; "
              f"B p50 {row['b']['p50']:.3f} ms, {row['b']['cpu_us']:.0f} µs", file=sys.stderr)
    print(f"| {args.tool}, {args.rounds} rounds × {args.seconds} s, load {os.getloadavg()[0]:.2f} "
          "| p50 ms (median) | gateway CPU µs per call (median) |")
    print("| --- | ---: | ---: |")
    for name, binary in (("a", args.a), ("b", args.b)):
        p50 = statistics.median(r[name]["p50"] for r in rows)
        cpu = statistics.median(r[name]["cpu_us"] for r in rows)
        print(f"| {name.upper()}: `{binary}` | {p50:.3f} | {cpu:.0f} |")
    ratio = statistics.median(r["b"]["p50"] / r["a"]["p50"] for r in rows)
    print(f"\nB/A p50, median of the rounds' ratios: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
