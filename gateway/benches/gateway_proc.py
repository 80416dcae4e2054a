"""A release gateway in a child process, for the benchmarks driven from outside
(nodelay_probe.py, execute_floor.py, upstream_floor.py): one echo tool, dev-admin auth,
no embedding model; and what those benchmarks read of a run (wrk's figures, a process's
CPU time).
Sessions are in memory unless the environment names a Redis (`REDIS_URL`): the gateway
inherits this process's environment. Standard library only."""
import http.client
import os
import socket
import subprocess
import sys
import time

TOOLS = """tools:
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - name: msg
        type: str
        required: true
    exec: echo {{ msg | quote }}
"""
USERS = """users:
  - username: bench
    groups: [admin, public]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(given=None):
    """The release gateway: `given`, else $CARGO_TARGET_DIR/release, else target/release."""
    if given:
        return given
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
        os.path.dirname(__file__), "..", "..", "target")
    path = os.path.join(target, "release", "mcc-gateway")
    if not os.path.exists(path):
        sys.exit(f"{path}: build it first (cargo build --release -p mcc-gateway)")
    return path


def start(gateway, work, port, server_settings="", more_tools=""):
    """Starts `gateway` on `port` with the echo tool; returns the process once /readyz
    answers 200. `server_settings`: extra lines of the `server:` section, indented;
    `more_tools`: top-level keys added to the tool file (e.g. `mcp_servers:`)."""
    with open(os.path.join(work, "tools.yaml"), "w") as f:
        f.write(TOOLS + more_tools)
    with open(os.path.join(work, "users.yaml"), "w") as f:
        f.write(USERS)
    settings = os.path.join(work, "settings.yaml")
    with open(settings, "w") as f:
        f.write(f"""server:
  port: {port}
  json_response: true
{server_settings}auth: dev-admin
tools: [{work}/tools.yaml]
users_file: {work}/users.yaml
""")
    env = dict(os.environ, MCC_LOG="warn")
    proc = subprocess.Popen([gateway, "serve", "--config", settings], env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "log"), "w"))
    for _ in range(300):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the gateway did not become ready; log: {work}/log")


def cpu_seconds(pid, children=False):
    """CPU time (user + system) process `pid` has used so far; with `children`, its
    reaped children's too."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def wrk(url, threads, connections, seconds, script="execute.lua", env=None):
    """wrk with one of ./wrk's scripts (their `done` prints `name value` lines): those
    figures as integers. Exits on any error wrk counted or any wrong answer."""
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
         "-s", os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk", script), url],
        check=True, capture_output=True, text=True, env=dict(os.environ, **(env or {}))).stdout
    v = {k: int(x) for k, x in (line.split() for line in out.splitlines()
         if line.split()[:1] and line.split()[0] in
         ("p50_us", "p90_us", "p99_us", "requests", "duration_us", "errors", "wrong"))}
    if v["errors"] or v["wrong"]:
        sys.exit(f"wrk saw {v['errors']} errors and {v['wrong']} wrong answers:\n{out}")
    return v
