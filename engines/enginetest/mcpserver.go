package enginetest

import _ "embed"

// MCPEchoServer is a tiny MCP server (a Node.js module) for live tests: write it into a
// box and configure an Agent's stdio MCP server with the command ["node", <path>], or
// start ["node", <path>, "--http", <port>] in the box (it prints "mcp-echo listening"
// when ready) and configure an http server at http://127.0.0.1:<port>/mcp. Its one tool,
// echo, answers "mcp-echo: <text> [tag=<tag>]", the tag being MCP_ECHO_TAG from its
// environment (stdio) or the request's X-Echo-Tag header (http), so a test sees both the
// call and the environment or headers the Agent configured.
//
//go:embed testdata/mcp-echo.mjs
var MCPEchoServer []byte

// MCPEchoTool is the echo server's tool name.
const MCPEchoTool = "echo"

// MCPElicitTool is the echo server's second tool, listed when its environment sets
// MCPElicitEnv to "1" (stdio): it sends the client MCP's elicitation/create for a form
// with one required string, name, and answers "mcp-echo elicited: <action> <content
// JSON>" with what came back.
const (
	MCPElicitTool = "elicit"
	MCPElicitEnv  = "MCP_ECHO_ELICIT"
)
