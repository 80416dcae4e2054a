"""A small MCP upstream whose tool list changes, on the official MCP Python SDK (`mcp`,
low-level `Server`, streamable HTTP with sessions). It speaks only the legacy generation
(`server/discover` is "method not found", as from a server older than 2026-07-28), so a
client keeps a standing GET stream; `POST /change?add=NAME` adds a tool and sends
`notifications/tools/list_changed` to every session it knows. `GET /seen` lists the
Authorization headers it received, `GET /metas` the `_meta` of every tools/call.

    python3 changing_upstream.py PORT [CERT KEY]    # with CERT and KEY: https

Used by e2e/cluster/upstreams.py (the operator's list_changed refresh)."""
import contextlib
import json
import sys

import uvicorn
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

TOOLS = ["first"]
SESSIONS = []


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description=f"the tool {n}", input_schema={"type": "object", "properties": {}})
        for n in TOOLS])


METAS = []  # the _meta of every tools/call (at most 1000)


async def call_tool(ctx, params):
    meta = ctx.meta
    meta = meta if isinstance(meta, dict) else (meta.model_dump(exclude_none=True) if meta else {})
    if len(METAS) < 1000:
        METAS.append(meta)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran")])


async def no_discover(ctx, params):
    raise MCPError(-32601, "Method not found")


async def remember(ctx, call_next):
    # Every session that spoke to us hears of changes (the standing stream's included).
    if ctx.session is not None and all(s is not ctx.session for s in SESSIONS):
        SESSIONS.append(ctx.session)
    return await call_next(ctx)


server = Server("changing", on_list_tools=list_tools, on_call_tool=call_tool)
server.add_request_handler("server/discover", types.RequestParams, no_discover)
server.middleware.append(remember)
# Advertise `tools.listChanged` in the initialize result (the SDK's default is false).
_options = server.create_initialization_options
server.create_initialization_options = lambda *a, **k: _options(NotificationOptions(tools_changed=True))
mcp_app = server.streamable_http_app(streamable_http_path="/mcp")


async def change(request):
    name = request.query_params.get("add", "")
    if name and name not in TOOLS:
        TOOLS.append(name)
    told = 0
    for s in list(SESSIONS):
        try:
            await s.send_tool_list_changed()
            told += 1
        except Exception:  # a closed session: forget it
            SESSIONS.remove(s)
    return JSONResponse({"tools": TOOLS, "told": told})


@contextlib.asynccontextmanager
async def lifespan(app):
    async with server.session_manager.run():
        yield


SEEN = []  # the Authorization headers received


async def seen(request):
    return JSONResponse(SEEN)


async def metas(request):
    # Through json with default=str: a value the SDK keeps as an object becomes text.
    return JSONResponse(json.loads(json.dumps(METAS, default=str)))


class Record:
    """Keeps every Authorization header an MCP request carried."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            for k, v in scope.get("headers", []):
                if k == b"authorization" and len(SEEN) < 1000:
                    SEEN.append(v.decode())
        await self.app(scope, receive, send)


app = Starlette(routes=[Route("/change", change, methods=["POST"]), Route("/seen", seen),
                        Route("/metas", metas),
                        Mount("/", app=Record(mcp_app))], lifespan=lifespan)

if __name__ == "__main__":
    tls = {"ssl_certfile": sys.argv[2], "ssl_keyfile": sys.argv[3]} if len(sys.argv) > 3 else {}
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", **tls)
