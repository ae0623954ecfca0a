package api

import (
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
)

// obj and str build the small JSON Schemas of the OpenAPI document.
func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

var (
	str    = map[string]any{"type": "string"}
	intS   = map[string]any{"type": "integer"}
	boolS  = map[string]any{"type": "boolean"}
	objAny = map[string]any{"type": "object"}
	strMap = map[string]any{"type": "object", "additionalProperties": str}
)

// arrayOf is the schema of a list of items.
func arrayOf(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

// agentConfig is an Agent's config (engines.AgentConfig). What each Agent program takes
// is checked on save against its declaration (docs/api.md, Agent configuration).
var agentConfig = obj(map[string]any{
	"mcp_servers": arrayOf(obj(map[string]any{
		"name": str, "transport": map[string]any{"type": "string", "enum": []string{"stdio", "http", "sse"}},
		"command": arrayOf(str), "env": strMap, "url": str, "headers": strMap,
	}, "name", "transport")),
	"skills":        arrayOf(obj(map[string]any{"name": str, "description": str, "instructions": str}, "name", "description", "instructions")),
	"packages":      arrayOf(obj(map[string]any{"kind": str, "name": str, "version": str}, "kind", "name")),
	"native_config": map[string]any{"type": "object", "additionalProperties": objAny},
	"instructions":  str,
})

// acpProgram is a RuntimeProfile's ACP program (engines/acp.Program), on a profile of
// the generic ACP kind only (docs/engines/acp.md, Adding an ACP program).
var acpProgram = obj(map[string]any{
	"title": str, "command": arrayOf(str), "env": strMap, "files": strMap, "model_key_env": str,
	"model_api": map[string]any{"type": "string", "enum": []string{"anthropic", "openai", "gemini"}},
	"state_dir": str, "state_dir_env": str, "session_log": str, "state_files": arrayOf(str),
	"modes": arrayOf(str), "default_mode": str,
	"busy":              map[string]any{"type": "string", "enum": []string{"queued", "cancels", "joined", "refused"}},
	"admission":         map[string]any{"type": "string", "enum": []string{"session_log", "prompt_reply"}},
	"resume":            map[string]any{"type": "string", "enum": []string{"load", "resume"}},
	"mcp_transports":    arrayOf(map[string]any{"type": "string", "enum": []string{"stdio", "http", "sse"}}),
	"instructions_file": str, "mode_update_text": str, "load_after_start_minute": boolS, "new_session_meta": objAny,
}, "command", "model_key_env", "state_dir", "busy", "admission", "resume")

// requestBodies are the JSON bodies routes take, by "METHOD path".
var requestBodies = map[string]map[string]any{
	"POST /runtime-profiles": obj(map[string]any{"name": str, "engine_kind": str, "image": str, "enabled": boolS,
		"sandbox_backend": str, "sandbox_tenancy": map[string]any{"type": "string", "enum": []string{"conversation", "shared"}},
		"resources": objAny, "network_policy": objAny, "tracing": obj(map[string]any{"enabled": boolS, "endpoint": str}), "prewarm_size": intS,
		"acp_program": acpProgram},
		"name", "engine_kind", "sandbox_backend"),
	"PATCH /runtime-profiles/{profile_id}": obj(map[string]any{"name": str, "image": str, "sandbox_backend": str, "sandbox_tenancy": str,
		"resources": objAny, "network_policy": objAny, "tracing": objAny, "prewarm_size": intS, "acp_program": acpProgram}),
	"POST /agents": obj(map[string]any{"name": str, "description": str, "runtime_profile_id": str, "config": agentConfig, "permission_mode": str},
		"name", "runtime_profile_id"),
	"PATCH /agents/{agent_id}": obj(map[string]any{"version": intS, "name": str, "description": str, "runtime_profile_id": str,
		"config": agentConfig, "permission_mode": str}, "version"),
	"POST /agents/{agent_id}/conversations": obj(map[string]any{}),
	"POST /sessions/{session_id}/shares": obj(map[string]any{"expires_at": map[string]any{"type": "string", "format": "date-time"},
		"allow_download": boolS}, "expires_at"),
	"POST /admin/users": obj(map[string]any{"email": map[string]any{"type": "string", "maxLength": maxEmailLen}, "display_name": str,
		"role": map[string]any{"type": "string", "enum": []string{store.RoleMember, store.RoleAdmin}}}, "email"),
	"POST /admin/users/{user_id}/tokens": obj(map[string]any{"name": map[string]any{"type": "string", "maxLength": maxTokenNameLen},
		"expires_at": map[string]any{"type": "string", "format": "date-time"}}, "name"),
	"PATCH /sessions/{session_id}":                obj(map[string]any{"title": map[string]any{"type": "string", "maxLength": store.MaxTitleLen}}, "title"),
	"POST /sessions/{session_id}/permission-mode": obj(map[string]any{"permission_mode": str}, "permission_mode"),
	"POST /sessions/{session_id}/inputs":          obj(map[string]any{"content": str, "client_message_id": str}, "content"),
	"POST /admin/sessions/{session_id}/history-import": obj(map[string]any{"messages": map[string]any{"type": "array", "maxItems": maxImportMessages,
		"items": obj(map[string]any{"source_id": str, "role": map[string]any{"type": "string", "enum": []string{"user", "assistant"}},
			"created_at": map[string]any{"type": "string", "format": "date-time"}, "completion": map[string]any{"type": "string", "enum": []string{"completed", "failed", "cancelled", "unknown"}},
			"parent_source_id": str, "blocks": map[string]any{"type": "array", "items": objAny}}, "source_id", "role", "created_at", "blocks")}}, "messages"),
	"POST /sessions/{session_id}/interactions/{interaction_id}/answer": obj(map[string]any{"answer": obj(map[string]any{"decision": str, "reason": str, "values": objAny})}, "answer"),
}

// queryParams are the query parameters routes take, by "METHOD path".
var queryParams = map[string][]string{
	"GET /runtime-profiles":                                                {"include_disabled"},
	"GET /sessions":                                                        {"page", "limit", "cursor", "archived"},
	"GET /sessions/{session_id}/stream":                                    {"after_seq"},
	"GET /sessions/{session_id}/messages":                                  {"before", "limit"},
	"GET /sessions/{session_id}/history-blocks":                            {"before", "limit"},
	"GET /sessions/{session_id}/history-blocks/{block_id}":                 {"cursor"},
	"GET /shared/{share_token}/stream":                                     {"after_seq"},
	"GET /shared/{share_token}/messages":                                   {"before", "limit"},
	"GET /shared/{share_token}/history-blocks":                             {"before", "limit"},
	"GET /shared/{share_token}/history-blocks/{block_id}":                  {"cursor"},
	"GET /sessions/{session_id}/workspace/files":                           {"path", "page", "limit"},
	"GET /sessions/{session_id}/workspace/download":                        {"path", "format"},
	"GET /shared/{share_token}/workspace/files":                            {"path", "page", "limit"},
	"GET /shared/{share_token}/workspace/download":                         {"path", "format"},
	"POST /sessions/{session_id}/workspace/files":                          {"path"},
	"GET /sessions/{session_id}/terminal":                                  {"after", "cols", "rows"},
	"GET /sessions/{session_id}/history-blocks/{block_id}/process-summary": {"cursor"},
}

// routeResponses are the outcomes a route documents beyond the generic success and
// error envelopes, by "METHOD path" and HTTP status.
var routeResponses = map[string]map[string]string{
	"GET /sessions/{session_id}/workspace/files": {
		"200": "data {path, entries: [{name, path, kind: file|directory|symlink|other, size, modified_at}], page, limit, total, has_more}: the folder path (relative to the workspace; empty: the workspace) sorted by name",
		"400": "INVALID_REQUEST naming path: absolute, climbing with .., holding a NUL byte, leading out of the workspace through a link, or not a folder",
		"404": "NOT_FOUND: no such Session of the caller, or no such folder",
		"409": "WORKSPACE_UNAVAILABLE: the Session has no running sandbox (its runtime is released or paused); the workspace is not woken, send a message to start the runtime",
	},
	"GET /sessions/{session_id}/workspace/download": {
		"200": "the file's bytes (its content type and Content-Length), or for a folder a tar (format=tar, the default) or zip (format=zip) archive streamed as it is made; links are stored as links. A transfer that fails midway is cut, never ended cleanly",
		"400": "INVALID_REQUEST naming path or format",
		"404": "NOT_FOUND: no such Session of the caller, or no such file",
		"409": "WORKSPACE_UNAVAILABLE: the Session has no running sandbox",
	},
	"POST /sessions/{session_id}/workspace/files": {
		"200": "data {files: [{name, path, kind, size, modified_at}]}: every file was written, owned by the sandbox's account; parent folders are created. A multipart/form-data body writes each file part into the folder path under its filename; any other body is the one file at path. All of an upload lands or none of it",
		"400": "INVALID_REQUEST naming path or files: an invalid path, a part without a filename, a target that is a folder",
		"409": "WORKSPACE_UNAVAILABLE: the Session has no running sandbox",
		"413": "PAYLOAD_TOO_LARGE: the upload is larger than the server's upload cap; nothing was written",
	},
	"GET /sessions/{session_id}/terminal": {
		"101": "WebSocket of JSON messages. Client: {type: input, text} and {type: resize, cols, rows}. Server: {type: ready, offset, first_offset}, {type: output, data (base64), offset: the byte offset after data}, {type: exit, code}, {type: error, message}. Reconnect with after=<last offset> to replay what was missed (as far as the scrollback reaches); every viewer shares one shell",
		"409": "WORKSPACE_UNAVAILABLE: the Session has no running sandbox",
	},
	"POST /sessions/{session_id}/terminal/interrupt": {
		"200": "data {session_id, interrupted}: SIGINT went to the terminal's foreground command (interrupted true), or the shell waits at its prompt or no terminal runs (false, nothing signalled). The Agent program and its response are not touched; the conversation's interrupt does not touch the terminal",
		"409": "WORKSPACE_UNAVAILABLE: the Session has no running sandbox",
	},
	"GET /agents": {
		"200": "data: the Agents, which every member may use. config is shown to an Agent's creator and administrators only (null for other members), with every MCP server env value and header replaced by \"" + RedactedSecret + "\"",
	},
	"GET /agents/{agent_id}": {
		"200": "data: the Agent; config as in GET /agents (null unless the caller created the Agent or is an administrator; secret values redacted)",
	},
	"PATCH /agents/{agent_id}": {
		"200": "data: the saved Agent. A config value sent as \"" + RedactedSecret + "\" keeps the stored secret value of the same MCP server name, member and key",
		"403": "FORBIDDEN: only the Agent's creator or an administrator can change it",
		"503": "SERVICE_UNAVAILABLE: the config holds secret values and the server has no secrets.key configured",
	},
	"POST /agents": {
		"503": "SERVICE_UNAVAILABLE: the config holds secret values and the server has no secrets.key configured",
	},
	"POST /sessions/{session_id}/shares": {
		"200": "data: the link {share_id, session_id, allow_download, state, created_at, expires_at, revoked_at}, its token and path (/api/v1/shared/<token>), shown this once: only the token's SHA-256 is stored. Viewers with the link read the Session's details, messages, history-blocks and stream there without an account; allow_download says whether they may download workspace files",
		"400": "INVALID_REQUEST: expires_at missing, not an RFC 3339 time, or not in the future",
		"403": "FORBIDDEN: only the Session's owner shares it",
	},
	"GET /sessions/{session_id}/shares": {
		"200": "data: the Session's links without tokens, newest first; state is active, expired or revoked",
	},
	"POST /sessions/{session_id}/shares/{share_id}/revoke": {
		"200": "data: the link, revoked (revoking again keeps the first time); it answers 404 from the next request on and a stream it holds ends at once",
	},
	"GET /shared/{share_token}": {
		"200": "data {session: the Session's details as GET /sessions/{session_id} gives them, share: {allow_download, expires_at}}",
		"404": "NOT_FOUND: the link is unknown, revoked or expired, its Session deleted, or its owner disabled",
	},
	"GET /shared/{share_token}/stream": {
		"404": "NOT_FOUND: the link is unknown, revoked or expired (an open stream ends at once on revocation, at its next periodic re-check on expiry)",
		"429": "TOO_MANY_STREAMS: the link already holds the most open streams allowed (http.max_streams_per_token)",
	},
	"GET /me": {
		"200": "data {user: {user_id, email, display_name, role, disabled, disabled_at, created_at, updated_at}, token: {token_id, user_id, name, prefix, state, created_at, last_used_at, expires_at, revoked_at}}",
	},
	"POST /admin/users": {
		"200": "data: the user {user_id, email, display_name, role (member by default), disabled, disabled_at, created_at, updated_at}",
		"409": "CONFLICT: a user with this email (compared case-insensitively) already exists",
	},
	"POST /admin/users/{user_id}/disable": {
		"200": "data: the user, disabled. Every token of theirs is refused from the next request on (their open streams end at once), and the share links of their Sessions answer 404; enabling restores what is neither revoked nor expired",
		"409": "CONFLICT: an administrator cannot disable their own account",
	},
	"POST /admin/users/{user_id}/tokens": {
		"200": "data: the token {token_id, user_id, name, prefix, state, created_at, last_used_at, expires_at, revoked_at} and its secret, shown this once: only its SHA-256 is stored. Without expires_at the token never expires",
		"400": "INVALID_REQUEST: name missing or longer than 100 characters, expires_at not an RFC 3339 time or not in the future",
		"409": "CONFLICT: the user is disabled",
	},
	"GET /admin/users/{user_id}/tokens": {
		"200": "data: the user's tokens without secrets, newest first; state is active, expired or revoked",
	},
	"POST /admin/users/{user_id}/tokens/{token_id}/revoke": {
		"200": "data: the token, revoked (revoking again keeps the first time). It is refused from the next request on; a stream it holds ends at once",
		"404": "NOT_FOUND: no such token of this user",
	},
	"GET /admin/sessions/{session_id}/diagnostics": {
		"200": "data: the Session's runtime diagnostics [{seq, event_type, raw, created_at}], oldest first: raw Agent-program evidence the platform kept instead of translating (the newest 500 per Session; never on a stream)",
		"403": "FORBIDDEN: administrators only",
	},
	"GET /sessions/{session_id}/stream": {
		"429": "TOO_MANY_STREAMS: the token already holds the most open streams allowed (http.max_streams_per_token)",
	},
	"POST /sessions/{session_id}/permission-mode": {
		"200": "data: the Session's details with the new permission_mode: a running Agent program accepted it (applied, then stored), or no program runs and the next one starts in it",
		"400": "INVALID_REQUEST: permission_mode is missing or not a mode the Agent program declares",
		"409": "PERMISSION_MODE_REFUSED: the running Agent program refused the mode; data {permission_mode, program_message} carries the program's own words and the Session keeps its mode. CONFLICT: the Session is deleted",
		"503": "SERVICE_UNAVAILABLE: the Session's workflow could not confirm the mode in time; read the Session for its current mode and try again",
	},
	"GET /sessions": {
		"200": "data: without page or cursor, the console's unpaged array of Session summaries, newest activity first, at most 1000 (limit 1..1000): header X-List-Truncated is true when Sessions were left out, and X-Next-Cursor then continues the list with GET /sessions?cursor=. With page=1 (limit 1..100, default 20) or cursor: {sessions, has_more, next_cursor}",
	},
	"GET /sessions/{session_id}": {
		"200": "data: the Session's details {session_id, agent_id, state, title, model_name, permission_mode, runtime_status, current_responses, last_response, pending_interaction, held_inputs, output_seq, runtime_unavailable, created_at, updated_at, archived, last_output_at, read_at, unread, runtime_error}; model_name is the model the Agent program reported for its current runtime (null until it has said)",
	},
	"GET /sessions/{session_id}/history-blocks/{block_id}/process-summary": {
		"200": "data {block_id, response_id, status, label, operations: [{name, count}], outcome, native_reason, response_completed}: status completed means label generation finished (the response ended; the label names the folded operations), pending while the response is open (label null). response_completed is true only for a completed response: false for a failed or cancelled one even when its label exists. Use outcome to decide whether the response succeeded",
		"400": "INVALID_REQUEST: the cursor does not address the block",
		"404": "NOT_FOUND: no such Session of the caller, or no such block",
	},
	"POST /sessions/{session_id}/interrupt": {
		"200": "data {session_id, status, request_id?}: accepted (a response is open and the request was passed to the running Agent program, which reports how it ended) or idle (no open response or held input was observed; a TERMINATED Session has no runtime, so it is never accepted there)",
		"409": "PENDING_INPUTS_NOT_CANCELLED: no open response, but accepted inputs are held; data.input_ids names them (not withdrawn, they may still run)",
	},
	"POST /sessions/{session_id}/archive": {
		"409": "SESSION_BUSY: the Agent program reports working (never for a TERMINATED Session, whose runtime was settled on termination)",
	},
	"DELETE /sessions/{session_id}": {
		"409": "SESSION_BUSY: the Agent program reports working (never for a TERMINATED Session)",
	},
	"POST /sessions/{session_id}/inputs": {
		"200": "data: the receipt {session_id, input_id, client_message_id, accepted_at, state, duplicate, failure, output_seq}. A message the Agent program or the deployment's runtime preparation refuses fails later (failure_code RUNTIME_PREPARATION_REFUSED for the preparation) and the stream reports it as a data-input-failed part {input_id, code, message}",
		"409": "AGENT_RUNTIME_ERROR: the Session is TERMINATED (recover it first) or DELETED",
	},
	"POST /sessions/{session_id}/child-runs/{child_run_id}/stop": {
		"200": "data {status: accepted, child_run_id}: the request was passed to the Session's workflow, which asks the running Agent program to stop the child run (now, or once its runtime connects again); the child run's status changes when the program reports it",
		"404": "NOT_FOUND: no such Session or child run of the caller",
		"409": "CONFLICT: the Agent program does not support stopping child runs, reported no control reference for this child run, or the child run has already ended (a final status, or its Session archived, released or terminated)",
		"503": "SERVICE_UNAVAILABLE: the Session's workflow could not be reached; try again",
	},
}

// openAPIPath turns a Gin path into an OpenAPI path and its path parameters.
func openAPIPath(ginPath string) (string, []string) {
	var params []string
	segs := strings.Split(ginPath, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			params = append(params, name)
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/"), params
}

// openAPIDocument describes every route of the public API.
func openAPIDocument() map[string]any {
	envelope := obj(map[string]any{"code": str, "message": str, "data": map[string]any{}}, "code", "message", "data")
	errorCodes := []string{CodeInvalidRequest, CodeUnauthorized, CodeForbidden, CodeNotFound, CodeConflict, CodeAgentRuntimeError,
		CodeSessionBusy, CodeInteractionNotOpen, CodePendingInputsNotCancelled, CodeAdmissionDenied, CodeHistoryImportAfterConversation,
		CodeHistoryImportConflict, CodePermissionModeRefused, CodePayloadTooLarge, CodeWorkspaceUnavailable, CodeTooManyStreams, CodeServiceUnavailable, CodeInternal}
	paths := map[string]any{}
	for i, r := range append(append([]route{}, apiRoutes...), sharedRoutes...) {
		viewer := i >= len(apiRoutes)
		p, params := openAPIPath(r.path)
		key := r.method + " " + p
		security := []any{map[string]any{"bearer": []string{}}}
		if viewer {
			// A share link's token in the path is the credential; no header is needed.
			security = []any{}
		}
		op := map[string]any{
			"summary":     r.summary,
			"operationId": strings.ToLower(r.method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_").Replace(p),
			"security":    security,
			"responses": map[string]any{
				"200":     map[string]any{"description": "success envelope {code: OK, message, data}", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
				"default": map[string]any{"description": "error envelope; code is one of " + strings.Join(errorCodes, ", "), "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
			},
		}
		var parameters []any
		for _, name := range params {
			param := map[string]any{"name": name, "in": "path", "required": true, "schema": str}
			if name == shareTokenParam {
				param["description"] = "the share link's token (abs_...), as POST /sessions/{session_id}/shares returned it; an unknown, revoked or expired link is 404"
			}
			parameters = append(parameters, param)
		}
		for _, name := range queryParams[key] {
			parameters = append(parameters, map[string]any{"name": name, "in": "query", "required": false, "schema": str})
		}
		if strings.HasSuffix(p, "/conversations") {
			parameters = append(parameters, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false, "schema": str})
		}
		if len(parameters) > 0 {
			op["parameters"] = parameters
		}
		if body, ok := requestBodies[key]; ok {
			op["requestBody"] = map[string]any{"required": !strings.HasSuffix(p, "/conversations"), "content": map[string]any{"application/json": map[string]any{"schema": body}}}
		}
		if strings.HasSuffix(p, "/stream") {
			op["responses"].(map[string]any)["200"] = map[string]any{"description": "AI SDK UI Message Stream (x-vercel-ai-ui-message-stream: v1): data: <chunk> events, each followed by a data-resume-cursor part; ends after the part that finishes a response, then data: [DONE]",
				"content": map[string]any{"text/event-stream": map[string]any{"schema": str}}}
		}
		for status, desc := range routeResponses[key] {
			op["responses"].(map[string]any)[status] = map[string]any{"description": desc,
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}}
		}
		item, _ := paths["/api/v1"+p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths["/api/v1"+p] = item
		}
		item[strings.ToLower(r.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "AstraBox API", "version": "v1", "description": "Agents, RuntimeProfiles and Sessions. Every response is the envelope {code, message, data}. " +
			"Every string in a request (body fields and member names, path and query values, the Idempotency-Key header) must be valid UTF-8 without the NUL character, or the request is 400 INVALID_REQUEST naming the field; text is stored exactly as sent. " +
			"A body larger than http.max_body_bytes (messages: http.max_input_bytes) is 413 PAYLOAD_TOO_LARGE; one not received within http.read_timeout is 408."},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas":         map[string]any{"Envelope": envelope},
		},
	}
}

func (s *Server) openAPI(c *gin.Context) { c.JSON(http.StatusOK, openAPIDocument()) }

var docsPage = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>AstraBox API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
code{background:#f3f3f3;padding:0 .2em}.m{display:inline-block;width:4.5rem;font-weight:600}
li{margin:.3rem 0}</style></head><body>
<h1>AstraBox API v1</h1>
<p>Every route needs <code>Authorization: Bearer &lt;token&gt;</code>, except a share link's
(<code>/api/v1/shared/{share_token}/...</code>), whose token is in the path; every route answers with the envelope
<code>{code, message, data}</code>. The machine-readable description is <a href="/openapi.json">/openapi.json</a>.</p>
<ul>{{range .}}<li><span class="m">{{.Method}}</span><code>{{.Path}}</code> — {{.Summary}}</li>{{end}}</ul>
</body></html>`))

// docs renders the routes of the OpenAPI document as a plain page (no CDN needed).
func (s *Server) docs(c *gin.Context) {
	type row struct{ Method, Path, Summary string }
	rows := make([]row, 0, len(apiRoutes)+len(sharedRoutes))
	for _, r := range append(append([]route{}, apiRoutes...), sharedRoutes...) {
		p, _ := openAPIPath(r.path)
		rows = append(rows, row{r.method, "/api/v1" + p, r.summary})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Path < rows[j].Path })
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	if err := docsPage.Execute(c.Writer, rows); err != nil {
		RequestLogger(c, s.log).Warn("render docs", zap.Error(err))
	}
}
