package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
