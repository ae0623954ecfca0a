package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/testutil"
)

// TestOpenAPIDescribesEveryRoute compares the served routes with the document, so a
// route added without a description fails here.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	st, _ := testutil.NewDB(t)
	s := New(Options{Logger: zap.NewNop(), Store: st, Signaler: &recordingSignaler{}})
	rec := do(s.Handler(), http.MethodGet, "/openapi.json", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)

	served := 0
	for _, r := range s.engine.Routes() {
		if !strings.HasPrefix(r.Path, "/api/v1/") {
			continue
		}
		served++
		p, _ := openAPIPath(r.Path)
		op, ok := doc.Paths[p][strings.ToLower(r.Method)]
		require.True(t, ok, "%s %s is not described", r.Method, p)
		assert.NotEmpty(t, op["summary"])
		if strings.HasPrefix(p, "/api/v1/shared/") {
			assert.Empty(t, op["security"], "a share link's routes need no token")
		} else {
			assert.NotEmpty(t, op["security"])
		}
	}
	assert.Equal(t, len(apiRoutes)+len(sharedRoutes), served)
	inputs := doc.Paths["/api/v1/sessions/{session_id}/inputs"]["post"]["requestBody"].(map[string]any)
	assert.Contains(t, mustJSON(t, inputs), `"client_message_id"`)
	stop := doc.Paths["/api/v1/sessions/{session_id}/child-runs/{child_run_id}/stop"]["post"]["responses"].(map[string]any)
	for _, status := range []string{"200", "404", "409"} {
		assert.Contains(t, stop, status, "the stop route documents %s", status)
	}
	mode := doc.Paths["/api/v1/sessions/{session_id}/permission-mode"]["post"]["responses"].(map[string]any)
	assert.Contains(t, mustJSON(t, mode["409"]), CodePermissionModeRefused, "the refusal is documented")
	assert.Contains(t, mustJSON(t, mode["409"]), "program_message")

	stream := doc.Paths["/api/v1/sessions/{session_id}/stream"]["get"]["responses"].(map[string]any)
	assert.Contains(t, stream, "429", "the stream documents its cap")
	agent := doc.Paths["/api/v1/agents/{agent_id}"]["get"]["responses"].(map[string]any)
	assert.Contains(t, mustJSON(t, agent), "secret values redacted")

	page := do(s.Handler(), http.MethodGet, "/docs", nil)
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Header().Get("Content-Type"), "text/html")
	for _, r := range apiRoutes {
		p, _ := openAPIPath(r.path)
		assert.Contains(t, page.Body.String(), "/api/v1"+p)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
