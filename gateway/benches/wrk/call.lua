-- wrk script: one MCP `tools/call` repeated on keep-alive connections, every answer
-- checked. Set by the environment (upstream_floor.py does), or by a script that sets the
-- global MCC_CALL = {tool, arguments, expected} and runs this one (execute.lua):
--   MCC_WRK_TOOL     the tool's name            MCC_WRK_ARGS   its arguments (JSON)
--   MCC_WRK_EXPECT   text every answer carries  MCC_WRK_SESSION  a legacy session's
--   Mcp-Session-Id (absent: a stateless 2026-07-28 request)
-- `done` prints latency percentiles, every error wrk counted (non-2xx answers included)
-- and the 200 answers without the expected text (a tool error is a 200 in MCP).
local given = MCC_CALL or {}
local tool = given.tool or os.getenv("MCC_WRK_TOOL")
local arguments = given.arguments or os.getenv("MCC_WRK_ARGS")
local expected = given.expected or os.getenv("MCC_WRK_EXPECT")
local session = os.getenv("MCC_WRK_SESSION") or ""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
local meta = ""
if session ~= "" then
  wrk.headers["Mcp-Session-Id"] = session
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
else
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
  meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    .. '"io.modelcontextprotocol/clientCapabilities":{},'
    .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"0"}}'
end
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. tool .. '",'
  .. '"arguments":' .. arguments .. meta .. '}}'

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  wrong = 0
end

function response(status, headers, body)
  if status == 200 and not body:find(expected, 1, true) then
    wrong = wrong + 1
  end
end

function done(summary, latency, requests)
  local w = 0
  for _, t in ipairs(threads) do
    w = w + t:get("wrong")
  end
  io.write(string.format("wrong %d\n", w))
  io.write(string.format("p50_us %d\np90_us %d\np99_us %d\nrequests %d\nduration_us %d\nerrors %d\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    summary.requests, summary.duration,
    summary.errors.status + summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout))
end
