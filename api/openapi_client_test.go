package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// webClientSpec is the copy of /openapi.json the web client's types are generated from
// (web/client, `npm run generate`).
var webClientSpec = filepath.Join("..", "web", "client", "openapi.json")

// TestWebClientSpecIsCurrent keeps the web client typed from the API as it is: a route
// or body changed here fails until the copy is refreshed with
// ASTRABOX_UPDATE_WEB_SPEC=1 and the types regenerated.
func TestWebClientSpecIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := json.MarshalIndent(openAPIDocument(), "", "  ")
	require.NoError(t, err)
	want = append(want, '\n')
	if os.Getenv("ASTRABOX_UPDATE_WEB_SPEC") == "1" {
		require.NoError(t, os.WriteFile(webClientSpec, want, 0o644))
	}
	got, err := os.ReadFile(webClientSpec)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got),
		"web/client/openapi.json is stale: run ASTRABOX_UPDATE_WEB_SPEC=1 go test ./api -run TestWebClientSpecIsCurrent, then npm run generate in web/client")
}
