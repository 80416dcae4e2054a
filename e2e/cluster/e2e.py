#!/usr/bin/env python3
"""The operator, the gateway and the chart against a real kube-apiserver (e2e/cluster/run.sh
sets it up: control plane, `helm install`, Redis). The chart's operator (two replicas)
and gateway (two replicas, each with its executor) run as host processes with the
chart's own ServiceAccounts and environment (hostpod.py): every API call they make goes
through the RBAC the chart rendered. Driven with kubectl and the official MCP Python SDK.

    e2e.py --kubeconfig admin.kubeconfig --bin target/debug --workdir DIR --redis-url URL \
        --helm helm --values e2e/cluster/values.yaml

Prints one line per check (`ok:` / `FAIL:`) and `N passed, N failed` last; exits 1 when
any check failed. Timings go to DIR/timings.json as well.
"""
import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from harness import Cluster, Report  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--bin", required=True, help="directory of mcc-operator, mcc-gateway, mcc-executor")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--helm", required=True)
    ap.add_argument("--values", required=True, help="the values run.sh installed the chart with")
    ap.add_argument("--port-base", type=int, default=18700)
    ap.add_argument("--bulk-tools", type=int, default=300)
    args = ap.parse_args()
    report = Report()
    cluster = Cluster(args, report)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        checks.run(cluster)
    except Exception as e:  # a broken step fails the run, with the processes' logs
        report.check("the run completed", False, f"{type(e).__name__}: {e}")
        for p in cluster.operators + [g for g, _, _ in cluster.gateways]:
            print(f"--- {p.name} (tail)\n{p.log_tail()}", file=sys.stderr)
    finally:
        cluster.stop_all()
        with open(os.path.join(args.workdir, "timings.json"), "w") as f:
            json.dump(report.timings, f, indent=1)
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    sys.exit(1 if report.failed else 0)


if __name__ == "__main__":
    main()
