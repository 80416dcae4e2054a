#!/usr/bin/env python3
"""Drive a running MCC gateway with the official MCP Python SDK, in both protocol
generations: the legacy initialize handshake (Mcp-Session-Id) and 2026-07-28 (stateless).

Needs `pip install "mcp>=2.3"` and a gateway serving the example tools in dev-admin mode:

    cargo run -p mcc-gateway -- serve            # from the repository root
    python3 e2e/mcp_python_sdk.py                # default URL http://127.0.0.1:8000/mcp
    python3 e2e/mcp_python_sdk.py --url http://host:port/mcp --skip-execute

With --approval-key KEY (a tool that needs approval, e.g. a gateway started with
MCC_EXECUTION__APPROVAL__GROUPS=ops, or a tool file with `approval: required`;
--approval-params its params as JSON), it also checks approval in both generations:
the question shows the key, an accepted call runs, a declined one is refused with
its own text.

Exits 0 when every check passes, 1 (after listing the failures) otherwise. `execute` needs
the execution engine; --skip-execute leaves those checks out.
"""

import argparse
import asyncio
import json
import sys

from mcp import types
from mcp.client.client import Client

EXPECTED_TOOLS = [
    "search",
    "execute",
    "whoami",
    "describe_tools",
    "set_session",
    "get_session",
    "new_session",
]
EXPECTED_PROMPTS = ["find_and_run", "explain_tool", "debug_error"]

failures = []


def check(label, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(label)


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def decline(context, params):
    check("elicitation message", params.message.startswith("Tool 'public.echo' requires: message (str)"), params.message)
    return types.ElicitResult(action="decline")


async def walkthrough(url, mode, run_execute):
    tag = f"[{mode}]"
    async with Client(url, mode=mode, elicitation_callback=decline) as client:
        tools = await client.list_tools()
        check(f"{tag} tools/list", [t.name for t in tools.tools] == EXPECTED_TOOLS, [t.name for t in tools.tools])
        prompts = await client.list_prompts()
        check(f"{tag} prompts/list", [p.name for p in prompts.prompts] == EXPECTED_PROMPTS)
        prompt = await client.get_prompt("explain_tool", {"key": "public.echo"})
        check(
            f"{tag} prompts/get",
            prompt.messages[0].content.text.startswith("Read the tool catalog entry for 'public.echo' and explain:"),
        )

        who = text(await client.call_tool("whoami", {}))
        check(f"{tag} whoami", who.startswith("username: ") and "\ntools: " in who, who)
        found = text(await client.call_tool("search", {"query": "echo a message"}))
        check(f"{tag} search", found.startswith("[") and "## public.echo (message:str)" in found, found)
        none = text(await client.call_tool("search", {"query": "echo", "min_score": 1000}))
        check(f"{tag} search min_score", none.startswith("No tools matched your query."), none)
        described = text(await client.call_tool("describe_tools", {"groups": ["public"]}))
        check(f"{tag} describe_tools", described.startswith("## public.echo\nEcho a message back."), described)

        # The seeds' session example, in a fresh bucket of its own.
        args = {}
        if mode != "legacy":
            handle = text(await client.call_tool("new_session", {}))
            check(f"{tag} new_session", handle.startswith("s_"), handle)
            args = {"session": handle}
        sets = [
            text(await client.call_tool("set_session", {"name": "target", "value": "10.0.0.5", **args})),
            text(await client.call_tool("set_session", {"name": "budget", "value": 1000, **args})),
        ]
        check(f"{tag} set_session", sets == ["Set 'target'.", "Set 'budget'."], sets)
        gets = [
            text(await client.call_tool("get_session", {"name": n, **args}))
            for n in ("target", "budget", "user", "never_set")
        ]
        check(f"{tag} get_session", gets[0] == '"10.0.0.5"' and gets[1] == "1000" and gets[3] == "null", gets)
        check(f"{tag} get_session user", json.loads(gets[2]) == who.splitlines()[0].removeprefix("username: "), gets[2])

        unknown = text(await client.call_tool("execute", {"key": "no.such.tool"}))
        check(f"{tag} execute unknown", unknown == "Unknown tool: no.such.tool", unknown)
        if mode == "legacy":
            cancelled = text(await client.call_tool("execute", {"key": "public.echo"}))
            check(f"{tag} elicitation declined", cancelled == "Execution cancelled: required parameters not provided", cancelled)
        if run_execute:
            echoed = text(await client.call_tool("execute", {"key": "public.echo", "params": {"message": "hello"}}))
            check(f"{tag} execute echo", echoed.strip() == "hello", echoed)
            report = text(await client.call_tool("execute", {"key": "public.whoami_echo", **args}))
            check(f"{tag} execute with session", "budget: 1000" in report, report)


async def approval(url, mode, key, params):
    """One accepted and one declined call of `key`, which needs approval."""
    for action in ("accept", "decline"):
        asked = []

        async def answer(context, request):
            asked.append(request.message)
            return types.ElicitResult(action=action, content={} if action == "accept" else None)

        tag = f"[{mode}] approval {action}"
        async with Client(url, mode=mode, elicitation_callback=answer) as client:
            result = await client.call_tool("execute", {"key": key, "params": params})
        out = text(result)
        check(f"{tag}: asked", len(asked) == 1 and asked[0].startswith(f"Approve running tool '{key}'"), asked)
        if action == "accept":
            check(f"{tag}: ran", not result.is_error and not out.startswith("Execution "), out)
        else:
            check(f"{tag}: refused", result.is_error and out == f"Execution not approved: running '{key}' was declined", out)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--skip-execute", action="store_true")
    parser.add_argument("--approval-key", help="a tool key that needs approval")
    parser.add_argument("--approval-params", default="{}", help="its params, as JSON")
    opts = parser.parse_args()
    for mode in ("legacy", "2026-07-28"):
        await walkthrough(opts.url, mode, not opts.skip_execute)
        if opts.approval_key:
            await approval(opts.url, mode, opts.approval_key, json.loads(opts.approval_params))
    if failures:
        print(f"\n{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
