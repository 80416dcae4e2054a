#!/usr/bin/env python3
"""A minimal MCP client over streamable HTTP (standard library only), for checks run in
a cluster pod: the executor image has python3, not the MCP SDK.

    mcp_http_check.py --url http://mcc-gateway.mcc-system.svc/mcp --expect-status 401
    mcp_http_check.py --url URL --token-file /var/run/mcc/token --whoami research-agent \
        --execute reports.title_case '{"s": "hello kind"}' 'Hello Kind'
    mcp_http_check.py --url URL --api-key-env MCC_KEY --execute ops.whoami_echo '{}' 'called by alice'
    mcp_http_check.py --url URL --expect-unreachable       # a NetworkPolicy refuses us

Speaks the 2025-11-25 protocol (initialize, Mcp-Session-Id, notifications/initialized,
tools/call); accepts JSON or SSE answers. Prints one line per check; exits 1 on failure.
"""
import argparse
import json
import os
import socket
import sys
import urllib.error
import urllib.request

failures = []
# Straight to the Service: a proxy from the environment would hide a NetworkPolicy.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def check(what, ok, detail=""):
    print(f"{'ok' if ok else 'FAIL'}: {what}{'' if ok else f' ({detail})'}", flush=True)
    if not ok:
        failures.append(what)


def post(url, body, credential=None, session=None, timeout=30):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with OPENER.open(req, timeout=timeout) as resp:
            raw = resp.read().decode()
            status, got = resp.status, resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()
    if "text/event-stream" in (got.get("Content-Type") or ""):
        events = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
        raw = next((e for e in reversed(events) if e), "")
    return status, got, raw


def call(url, credential, session, rid, name, arguments):
    status, _, raw = post(url, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                "params": {"name": name, "arguments": arguments}}, credential, session)
    if status != 200:
        return f"HTTP {status}: {raw[:300]}"
    msg = json.loads(raw)
    if "error" in msg:
        return f"JSON-RPC error: {msg['error']}"
    return "\n".join(c.get("text", "") for c in msg["result"].get("content", []))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token-file")
    p.add_argument("--api-key-env")
    p.add_argument("--expect-status", type=int)
    p.add_argument("--expect-unreachable", action="store_true")
    p.add_argument("--whoami")
    p.add_argument("--execute", nargs=3, action="append", default=[], metavar=("KEY", "PARAMS", "EXPECT"))
    a = p.parse_args()

    credential = None
    if a.token_file:
        credential = open(a.token_file).read().strip()
    elif a.api_key_env:
        credential = os.environ[a.api_key_env].strip()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "mcc-e2e", "version": "1"}}}

    if a.expect_unreachable:
        try:
            status, _, _ = post(a.url, init, credential, timeout=8)
            check("the gateway is unreachable from here", False, f"HTTP {status}")
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as e:
            check(f"the gateway is unreachable from here ({e})", True)
        return finish()

    status, headers, raw = post(a.url, init, credential)
    if a.expect_status is not None:
        check(f"initialize answers HTTP {a.expect_status}", status == a.expect_status, f"HTTP {status}: {raw[:200]}")
        if a.expect_status == 401:
            check("with a WWW-Authenticate challenge", "Bearer" in (headers.get("WWW-Authenticate") or ""),
                  headers.get("WWW-Authenticate"))
        return finish()
    check("initialize", status == 200, f"HTTP {status}: {raw[:300]}")
    if status != 200:
        return finish()
    session = headers.get("Mcp-Session-Id")
    status, _, raw = post(a.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, credential, session)
    check("notifications/initialized", status in (200, 202), f"HTTP {status}: {raw[:200]}")

    rid = 2
    if a.whoami:
        text = call(a.url, credential, session, rid, "whoami", {})
        check(f"whoami is {a.whoami}", a.whoami in text, text[:300])
        rid += 1
    for key, params, expect in a.execute:
        text = call(a.url, credential, session, rid, "execute", {"key": key, "params": json.loads(params)})
        check(f"execute {key} answers {expect!r}", expect in text, text[:300])
        rid += 1
    return finish()


def finish():
    print("mcp checks:", "FAIL" if failures else "ok", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
