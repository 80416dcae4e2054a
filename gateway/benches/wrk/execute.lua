-- wrk script: MCP `tools/call execute` of public.echo, stateless 2026-07-28, plain JSON
-- answers, on keep-alive connections, every answer checked (call.lua does the calling,
-- checking and reporting: `done` prints latency percentiles, every error wrk counted,
-- non-2xx answers included, and the 200 answers that did not carry the echo).
-- MCC_WRK_TOOL=whoami calls `whoami` instead (the MCP path without the tool run; the
-- answer must name the caller, `bench`).
local tool = os.getenv("MCC_WRK_TOOL") or "execute"
wrk.path = "/mcp"
MCC_CALL = { tool = tool, arguments = '{"key":"public.echo","params":{"msg":"hello"}}', expected = "hello" }
if tool == "whoami" then
  MCC_CALL.arguments = "{}"
  MCC_CALL.expected = "bench"
end
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "call.lua")
