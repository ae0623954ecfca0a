package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoRouteFailsOnBadInput sends malformed bodies and odd path values to every route:
// each answer is a refusal in the envelope (4xx), never an internal error, and nothing
// is written.
func TestNoRouteFailsOnBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	params := map[string][]string{
		":session_id":     {id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"},
		":agent_id":       {f.agent.ID, "x"},
		":profile_id":     {f.profile.ID, "x"},
		":interaction_id": {"missing", "%20"},
		":child_run_id":   {"missing"},
		":block_id":       {"r.work", "x"},
	}
	bodies := []string{`{`, `[]`, `null`, `"s"`, `{"x":1}`, `{"content":null,"title":[],"version":"1","answer":7,"messages":{}}`, strings.Repeat("[", 5000)}
	before := f.countInputs(id)
	for _, r := range apiRoutes {
		paths := []string{r.path}
		for name, values := range params {
			var next []string
			for _, p := range paths {
				if !strings.Contains(p, name) {
					next = append(next, p)
					continue
				}
				for _, v := range values {
					next = append(next, strings.Replace(p, name, v, 1))
				}
			}
			paths = next
		}
		for _, p := range paths {
			for _, body := range bodies {
				var b any
				if r.method != http.MethodGet {
					b = body
				}
				got := f.call(r.method, "/api/v1"+p+"?limit=abc&after_seq=-1&cursor=%25", f.admin, b)
				assert.Less(t, got.Status, 500, "%s %s %s: %s %s", r.method, p, body, got.Code, got.Message)
				if strings.HasSuffix(p, "/stream") {
					continue // a valid stream request waits for output
				}
				got = f.call(r.method, "/api/v1"+p, f.member, b)
				assert.Less(t, got.Status, 500, "%s %s %s: %s %s", r.method, p, body, got.Code, got.Message)
			}
		}
	}
	assert.Equal(t, before, f.countInputs(id))
	assert.Equal(t, "CREATING", f.session(id, f.member).State)
}

// TestUnstorableTextIsRefused sends text PostgreSQL cannot hold, or that the JSON
// decoder would silently alter, in every kind of field: each is 400 INVALID_REQUEST
// naming the field, and nothing is written.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	agentPath := "/api/v1/agents/" + f.agent.ID
	agentBody := func(name, description, config string) string {
		return `{"name":` + name + `,"description":` + description + `,"runtime_profile_id":"` + f.profile.ID + `","config":` + config + `}`
	}
	stdio := func(env string) string {
		return `{"mcp_servers":[{"name":"git","transport":"stdio","command":["git-mcp"],"env":` + env + `}]}`
	}
	cases := []struct {
		name, method, path, body, field string
		header                          []string
	}{
		{"NUL in agent name", "POST", "/api/v1/agents", agentBody(`"a\u0000b"`, `""`, `{}`), "name: ", nil},
		{"NUL in agent description", "POST", "/api/v1/agents", agentBody(`"nul-description"`, `"x\u0000"`, `{}`), "description: ", nil},
		{"NUL in agent config value", "POST", "/api/v1/agents", agentBody(`"nul-config"`, `""`, stdio(`{"TOKEN":"a\u0000"}`)), "config.mcp_servers[0].env.TOKEN: ", nil},
		{"NUL in agent config member name", "POST", "/api/v1/agents", agentBody(`"nul-key"`, `""`, stdio(`{"TO\u0000KEN":"a"}`)), "config.mcp_servers[0].env: a member name", nil},
		{"invalid UTF-8 in agent config", "POST", "/api/v1/agents", agentBody(`"bad-utf8"`, `""`, stdio("{\"TOKEN\":\"\xff\xfe\"}")), "config.mcp_servers[0].env.TOKEN: must be valid UTF-8", nil},
		{"NUL in agent update", "PATCH", agentPath, `{"version":1,"name":"\u0000"}`, "name: ", nil},
		{"NUL in session title", "PATCH", "/api/v1/sessions/" + id, `{"title":"a\u0000b"}`, "title: ", nil},
		{"invalid UTF-8 in session title", "PATCH", "/api/v1/sessions/" + id, "{\"title\":\"caf\xe9\"}", "title: must be valid UTF-8", nil},
		{"invalid UTF-8 in message content", "POST", "/api/v1/sessions/" + id + "/inputs", "{\"content\":\"hello \xc3\x28 world\"}", "content: must be valid UTF-8", nil},
		{"NUL in message content", "POST", "/api/v1/sessions/" + id + "/inputs", `{"content":"hello\u0000"}`, "content: ", nil},
		{"invalid UTF-8 in client_message_id", "POST", "/api/v1/sessions/" + id + "/inputs", "{\"content\":\"hi\",\"client_message_id\":\"\xff\"}", "client_message_id: must be valid UTF-8", nil},
		{"invalid UTF-8 in Idempotency-Key", "POST", agentPath + "/conversations", `{}`, "Idempotency-Key: must be valid UTF-8", []string{"Idempotency-Key", "key-\xff"}},
		{"NUL in a query value", "GET", "/api/v1/sessions/" + id + "/history-blocks/r.work?cursor=%00", "", "cursor: ", nil},
		{"NUL in a path value", "POST", "/api/v1/sessions/" + id + "/interactions/a%00b/answer", `{}`, "interaction_id: ", nil},
	}
	sessions := f.countSessions()
	for _, tc := range cases {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		token := f.member
		if tc.method == "PATCH" && tc.path == agentPath {
			token = f.admin // the fixture's Agent is the admin's
		}
		got := f.call(tc.method, tc.path, token, body, tc.header...)
		got.refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
	}
	assert.Equal(t, 0, f.countInputs(id))
	assert.Equal(t, sessions, f.countSessions())
	var agents []agentView
	f.call("GET", "/api/v1/agents", f.admin, nil).ok(t).into(t, &agents)
	assert.Len(t, agents, 1)
	assert.Nil(t, f.session(id, f.member).Title)

	// Text that is valid stays exactly as sent, U+FFFD included.
	exact := "caf\u00e9 \ufffd \U0001F600 \\u0000 as text"
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]string{"content": exact}).ok(t)
	var content string
	require.NoError(t, f.db.QueryRow(f.ctx, "SELECT content FROM inputs WHERE session_id = $1", id).Scan(&content))
	assert.Equal(t, exact, content)
}

func (f *fixture) countSessions() int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.db.QueryRow(f.ctx, "SELECT count(*) FROM sessions").Scan(&n))
	return n
}
