// A legacy-generation MCP server (the official TypeScript SDK, streamable HTTP, one
// session per client) whose `whoami` answers with what its request carried.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

const sessions = {};
http.createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  let transport = sessions[req.headers["mcp-session-id"]];
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions[id] = transport; },
    });
    const server = new McpServer({ name: "meta-echo", version: "0" });
    server.registerTool("whoami", { description: "What this call's request carried." },
      async (extra) => ({ content: [{ type: "text",
        text: JSON.stringify({ id: extra.requestId, meta: extra._meta ?? {} }) }] }));
    await server.connect(transport);
  }
  await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
}).listen(Number(process.argv[2]), "127.0.0.1");
