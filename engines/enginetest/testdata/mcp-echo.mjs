// A tiny MCP server run inside a box by the live tests: over stdio (newline-delimited
// JSON-RPC 2.0) by default, or with `--http PORT` over HTTP: streamable HTTP (POST /mcp,
// JSON replies) and the legacy HTTP+SSE transport (GET /sse opens the event stream,
// whose `endpoint` event names where to POST; answers come as `message` events). Its
// one tool, echo, answers with the text it was given and a tag: the value of
// MCP_ECHO_TAG from its environment (stdio) or of the request's X-Echo-Tag header
// (http: the POST's; sse: the GET's), so a test sees that a call reached this server
// with the environment or headers the Agent configured. With MCP_ECHO_ELICIT=1 (stdio) it
// also lists elicit, which asks the client for a name through MCP's elicitation/create
// and answers with the action and content it got back.
import { createInterface } from "node:readline";
import { createServer } from "node:http";

const tools = [{
  name: "echo",
  description: "Echo the given text back, tagged by the server.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  annotations: { readOnlyHint: true, destructiveHint: false, openWorldHint: false },
}];

const reply = (id, result) => ({ jsonrpc: "2.0", id, result });
const fail = (id, code, message) => ({ jsonrpc: "2.0", id, error: { code, message } });

// handle answers one message, or returns undefined for a notification.
function handle(msg, tag) {
  const { id, method, params } = msg;
  if (id === undefined || id === null) {
    return undefined; // a notification (notifications/initialized, cancelled): nothing to answer
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

const elicitTool = {
  name: "elicit",
  description: "Ask the person for a name through MCP elicitation, then echo the answer.",
  inputSchema: { type: "object", properties: { message: { type: "string" } } },
  // Read-only, so a client that asks before running a tool with side effects lets the
  // call reach the elicitation.
  annotations: { readOnlyHint: true, destructiveHint: false, openWorldHint: false },
};

function serveStdio() {
  const tag = process.env.MCP_ECHO_TAG ?? "";
  const elicit = process.env.MCP_ECHO_ELICIT === "1";
  if (elicit) {
    tools.push(elicitTool);
  }
  const write = (answer) => answer && process.stdout.write(JSON.stringify(answer) + "\n");
  const waiting = new Map(); // our elicitation/create id -> the tools/call id it answers
  let nextElicitation = 0;
  createInterface({ input: process.stdin }).on("line", (line) => {
    if (line.trim() === "") {
      return;
    }
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return write(fail(null, -32700, "parse error"));
    }
    if (msg.method === undefined && waiting.has(msg.id)) {
      const callID = waiting.get(msg.id);
      waiting.delete(msg.id);
      const answer = msg.error ? `error ${msg.error.message}` : `${msg.result?.action} ${JSON.stringify(msg.result?.content ?? null)}`;
      return write(reply(callID, { content: [{ type: "text", text: `mcp-echo elicited: ${answer}` }], isError: false }));
    }
    if (elicit && msg.method === "tools/call" && msg.params?.name === "elicit") {
      const id = `elicit-${++nextElicitation}`;
      waiting.set(id, msg.id);
      return write({
        jsonrpc: "2.0", id, method: "elicitation/create",
        params: {
          message: String(msg.params?.arguments?.message ?? "Which name?"),
          requestedSchema: { type: "object", properties: { name: { type: "string", title: "Name" } }, required: ["name"] },
        },
      });
    }
    write(handle(msg, tag));
  });
}

function serveHTTP(port) {
  const streams = new Map(); // legacy SSE sessions: id -> {res, tag}
  let nextStream = 0;
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://localhost");
    if (req.method === "GET" && url.pathname === "/sse") {
      const id = String(++nextStream);
      streams.set(id, { res, tag: req.headers["x-echo-tag"] ?? "" });
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      res.write(`event: endpoint\ndata: /messages?sessionId=${id}\n\n`);
      req.on("close", () => streams.delete(id));
      return;
    }
    if (req.method === "POST" && url.pathname === "/messages") {
      const stream = streams.get(url.searchParams.get("sessionId"));
      if (!stream) {
        res.writeHead(404).end();
        return;
      }
      let body = "";
      req.on("data", (chunk) => { body += chunk; });
      req.on("end", () => {
        res.writeHead(202).end();
        let msg;
        try {
          msg = JSON.parse(body);
        } catch {
          return;
        }
        const answer = handle(msg, stream.tag);
        if (answer) {
          stream.res.write(`event: message\ndata: ${JSON.stringify(answer)}\n\n`);
        }
      });
      return;
    }
    if (req.method !== "POST" || url.pathname !== "/mcp") {
      res.writeHead(405, { Allow: "POST" }).end();
      return;
    }
    const tag = req.headers["x-echo-tag"] ?? "";
    let body = "";
    req.on("data", (chunk) => { body += chunk; });
    req.on("end", () => {
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        res.writeHead(400, { "Content-Type": "application/json" }).end(JSON.stringify(fail(null, -32700, "parse error")));
        return;
      }
      const answers = (Array.isArray(msg) ? msg : [msg]).map((m) => handle(m, tag)).filter(Boolean);
      if (answers.length === 0) {
        res.writeHead(202).end();
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" })
        .end(JSON.stringify(Array.isArray(msg) ? answers : answers[0]));
    });
  });
  server.listen(port, "127.0.0.1", () => console.log(`mcp-echo listening on ${port}`));
}

const httpFlag = process.argv.indexOf("--http");
if (httpFlag >= 0) {
  serveHTTP(Number(process.argv[httpFlag + 1]));
} else {
  serveStdio();
}
