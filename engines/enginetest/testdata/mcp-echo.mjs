// A tiny MCP server over stdio (newline-delimited JSON-RPC 2.0), run inside a box by
// the live tests. Its one tool, echo, answers with the text it was given, the
// server's name and the value of MCP_ECHO_TAG from its environment, so a test sees
// that a call reached this server with the environment the Agent configured.
import { createInterface } from "node:readline";

const tag = process.env.MCP_ECHO_TAG ?? "";

const tools = [{
  name: "echo",
  description: "Echo the given text back, tagged by the server.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  annotations: { readOnlyHint: true, destructiveHint: false, openWorldHint: false },
}];

function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n");
}

function fail(id, code, message) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n");
}

function handle(msg) {
  const { id, method, params } = msg;
  if (id === undefined || id === null) {
    return; // a notification (notifications/initialized, cancelled): nothing to answer
  }
  switch (method) {
    case "initialize":
      return reply(id, {
        protocolVersion: params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: "mcp-echo", version: "1.0.0" },
      });
    case "ping":
      return reply(id, {});
    case "tools/list":
      return reply(id, { tools });
    case "tools/call": {
      if (params?.name !== "echo") {
        return fail(id, -32602, `unknown tool ${params?.name}`);
      }
      const text = String(params?.arguments?.text ?? "");
      return reply(id, { content: [{ type: "text", text: `mcp-echo: ${text} [tag=${tag}]` }], isError: false });
    }
    default:
      return fail(id, -32601, `method ${method} not found`);
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "") {
    return;
  }
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return fail(null, -32700, "parse error");
  }
  handle(msg);
});
