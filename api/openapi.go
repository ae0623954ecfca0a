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

// requestBodies are the JSON bodies routes take, by "METHOD path".
var requestBodies = map[string]map[string]any{
	"POST /runtime-profiles": obj(map[string]any{"name": str, "engine_kind": str, "image": str, "enabled": boolS,
		"sandbox_backend": str, "sandbox_tenancy": map[string]any{"type": "string", "enum": []string{"conversation", "shared"}},
		"resources": objAny, "network_policy": objAny, "tracing": obj(map[string]any{"enabled": boolS, "endpoint": str}), "prewarm_size": intS},
		"name", "engine_kind", "sandbox_backend"),
	"PATCH /runtime-profiles/{profile_id}": obj(map[string]any{"name": str, "image": str, "sandbox_backend": str, "sandbox_tenancy": str,
		"resources": objAny, "network_policy": objAny, "tracing": objAny, "prewarm_size": intS}),
	"POST /agents": obj(map[string]any{"name": str, "description": str, "runtime_profile_id": str, "config": agentConfig, "permission_mode": str},
		"name", "runtime_profile_id"),
	"PATCH /agents/{agent_id}": obj(map[string]any{"version": intS, "name": str, "description": str, "runtime_profile_id": str,
		"config": agentConfig, "permission_mode": str}, "version"),
	"POST /agents/{agent_id}/conversations":       obj(map[string]any{}),
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
	"GET /runtime-profiles":                                {"include_disabled"},
	"GET /sessions":                                        {"page", "limit", "cursor", "archived"},
	"GET /sessions/{session_id}/stream":                    {"after_seq"},
	"GET /sessions/{session_id}/messages":                  {"before", "limit"},
	"GET /sessions/{session_id}/history-blocks":            {"before", "limit"},
	"GET /sessions/{session_id}/history-blocks/{block_id}": {"cursor"},
}

// routeResponses are the outcomes a route documents beyond the generic success and
// error envelopes, by "METHOD path" and HTTP status.
var routeResponses = map[string]map[string]string{
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
		CodeHistoryImportConflict, CodePermissionModeRefused, CodePayloadTooLarge, CodeTooManyStreams, CodeServiceUnavailable, CodeInternal}
	paths := map[string]any{}
	for _, r := range apiRoutes {
		p, params := openAPIPath(r.path)
		key := r.method + " " + p
		op := map[string]any{
			"summary":     r.summary,
			"operationId": strings.ToLower(r.method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_").Replace(p),
			"security":    []any{map[string]any{"bearer": []string{}}},
			"responses": map[string]any{
				"200":     map[string]any{"description": "success envelope {code: OK, message, data}", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
				"default": map[string]any{"description": "error envelope; code is one of " + strings.Join(errorCodes, ", "), "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Envelope"}}}},
			},
		}
		var parameters []any
		for _, name := range params {
			parameters = append(parameters, map[string]any{"name": name, "in": "path", "required": true, "schema": str})
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
<p>Every route needs <code>Authorization: Bearer &lt;token&gt;</code> and answers with the envelope
<code>{code, message, data}</code>. The machine-readable description is <a href="/openapi.json">/openapi.json</a>.</p>
<ul>{{range .}}<li><span class="m">{{.Method}}</span><code>{{.Path}}</code> — {{.Summary}}</li>{{end}}</ul>
</body></html>`))

// docs renders the routes of the OpenAPI document as a plain page (no CDN needed).
func (s *Server) docs(c *gin.Context) {
	type row struct{ Method, Path, Summary string }
	rows := make([]row, 0, len(apiRoutes))
	for _, r := range apiRoutes {
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
