// A legacy-generation MCP server (the official TypeScript SDK, streamable HTTP, one
// session per client, no standing stream, an unknown session is a 404) whose `whoami`
// answers with what its request carried.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

const sessions = {};
http.createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  if (req.method === "GET") {
    // No standing stream (the spec allows a 405): what the gateway learns of a lost
    // session, it learns from its calls.
    res.writeHead(405).end();
    return;
  }
  const id = req.headers["mcp-session-id"];
  let transport = sessions[id];
  if (id && !transport) {
    // A session this process never opened (it restarted): 404, as the spec asks.
    res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify(
      { jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
    return;
  }
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions[id] = transport; },
    });
    const server = new McpServer({ name: "meta-echo", version: "0" });
    server.registerTool("whoami", { description: "What this call's request carried." },
      async (extra) => ({ content: [{ type: "text",
        text: JSON.stringify({ id: extra.requestId, meta: extra._meta ?? {} }) }] }));
    server.registerTool("big", { description: "An answer of 9 MiB." },
      async () => ({ content: [{ type: "text", text: "x".repeat(9 * 1024 * 1024) }] }));
    await server.connect(transport);
  }
  await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
}).listen(Number(process.argv[2]), "127.0.0.1");
