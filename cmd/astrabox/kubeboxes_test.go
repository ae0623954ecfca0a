package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/testutil"
)

// TestTheKubernetesBackendSpeaksToTheConfiguredAPIServer opens the backend as
// the worker does, from configuration with a kubeconfig, and lists boxes against
// an API server that records what it is asked: the agent-sandbox resources in
// the configured namespace, selected by this deployment's label.
func TestTheKubernetesBackendSpeaksToTheConfiguredAPIServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"List","metadata":{},"items":[]}`))
	}))
	defer server.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: `+server.URL+`}}]
users: [{name: u, user: {token: t0k3n}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	cfg, err := config.Load(config.Source{Environ: []string{
		"ASTRABOX_SANDBOX_BACKEND=kubernetes",
		"ASTRABOX_SANDBOX_KUBERNETES_KUBECONFIG=" + kubeconfig,
		"ASTRABOX_SANDBOX_KUBERNETES_NAMESPACE=boxes",
		"ASTRABOX_SANDBOX_KUBERNETES_INSTANCE=prod",
	}})
	require.NoError(t, err)
	backend, err := openKubernetesBackend(cfg, testutil.Logger(t))
	require.NoError(t, err)
	defer backend.Close()
	list, err := backend.List(testutil.Context(t))
	require.NoError(t, err)
	require.Empty(t, list)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{
		"GET /apis/agents.x-k8s.io/v1beta1/namespaces/boxes/sandboxes?labelSelector=astrabox.dev%2Fmanaged-by%3Dprod%2Castrabox.dev%2Fbox",
		"GET /apis/extensions.agents.x-k8s.io/v1beta1/namespaces/boxes/sandboxclaims?labelSelector=astrabox.dev%2Fmanaged-by%3Dprod%2Castrabox.dev%2Fbox",
	}, asked)
	require.False(t, backend.Capabilities().Pause)

	cfg.Sandbox.Kubernetes.Kubeconfig = ""
	_, err = openKubernetesBackend(cfg, testutil.Logger(t))
	require.ErrorContains(t, err, "cluster credentials", "outside a pod and without a kubeconfig, no backend")
}
