-- wrk script: MCP `tools/call execute` of public.echo, stateless 2026-07-28, plain JSON
-- answers, on keep-alive connections. Every answer is checked: `done` reports latency
-- percentiles, every error wrk counted (non-2xx answers included) and the 200 answers
-- that did not carry the echo (a tool error is a 200 in MCP).
-- MCC_WRK_TOOL=whoami calls `whoami` instead (the MCP path without the tool run; the
-- answer must name the caller, `bench`).
local tool = os.getenv("MCC_WRK_TOOL") or "execute"
local arguments = '{"key":"public.echo","params":{"msg":"hello"}}'
local expected = "hello"
if tool == "whoami" then
  arguments = "{}"
  expected = "bench"
end
wrk.method = "POST"
wrk.path = "/mcp"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = tool
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. tool .. '",'
  .. '"arguments":' .. arguments .. ','
  .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{},'
  .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"0"}}}}'

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
