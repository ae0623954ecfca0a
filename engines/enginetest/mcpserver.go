package enginetest

import _ "embed"

// MCPEchoServer is a tiny stdio MCP server (a Node.js module) for live tests: write it
// into a box and configure an Agent's MCP server with the command
// ["node", <path>]. Its one tool, echo, answers "mcp-echo: <text> [tag=<MCP_ECHO_TAG>]",
// so a test sees both the call and the environment the Agent configured.
//
//go:embed testdata/mcp-echo.mjs
var MCPEchoServer []byte

// MCPEchoTool is the echo server's tool name.
const MCPEchoTool = "echo"
