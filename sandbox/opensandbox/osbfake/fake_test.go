package osbfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type noRuntime struct{}

func (noRuntime) Start(string, CreateRequest) (Box, error) { panic("no box starts in these tests") }

func post(t *testing.T, url, key, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(APIKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp, out
}

// TestValidatorCatchesRequestsOffTheDocument: a request the document does not
// allow is answered 400 with an ErrorResponse and recorded as a violation,
// so a backend that sent it fails its tests.
func TestValidatorCatchesRequestsOffTheDocument(t *testing.T) {
	f, err := New(noRuntime{}, "k")
	require.NoError(t, err)
	defer f.Close()
	f.KeepPending(-1)
	resp, body := post(t, f.URL+"/sandboxes", "k", `{"image":{"uri":"x"},"entrypoint":[],"resourceLimits":{"cpu":1}}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "INVALID_REQUEST", body["code"])
	v := f.Violations()
	require.Len(t, v, 1)
	require.Contains(t, v[0], "request does not match the document")
}

// TestErrorsFollowTheDocument: a missing key and an injected 429 answer with
// the document's ErrorResponse and X-Request-ID, and leave no violation.
func TestErrorsFollowTheDocument(t *testing.T) {
	f, err := New(noRuntime{}, "k")
	require.NoError(t, err)
	defer f.Close()
	f.KeepPending(-1)
	ok := `{"image":{"uri":"x"},"entrypoint":["/bin/true"],"resourceLimits":{"cpu":"1"}}`
	resp, body := post(t, f.URL+"/sandboxes", "", ok)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NotEmpty(t, body["message"])
	require.NotEmpty(t, resp.Header.Get("X-Request-ID"))
	f.FailNext(CreateSandbox, http.StatusTooManyRequests, 1, 2)
	resp, _ = post(t, f.URL+"/sandboxes", "k", ok)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	resp, body = post(t, f.URL+"/sandboxes", "k", ok)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.NotEmpty(t, body["id"])
	require.Empty(t, f.Violations())
}
