package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestProfileBackendMustServeTheEngine: a RuntimeProfile selects its sandbox
// backend, and the registry refuses one that lacks what the engine requires
// (process sessions) or cannot run the image as named (a directory on a
// backend that pulls images), with the field named in the envelope and
// nothing stored.
func TestProfileBackendMustServeTheEngine(t *testing.T) {
	t.Parallel()
	const needsProcs = "needsprocs"
	f := newFixture(t, func(o *Options) {
		caps := testCaps(needsProcs, engines.SessionKindAgentChat)
		caps.RequiresProcessSessions = true
		require.NoError(t, o.Registry.Register(needsProcs, &testAdapter{caps: caps}))
		o.SandboxBackends = map[string]engines.SandboxBackendCapabilities{
			store.SandboxLocal:       DefaultSandboxBackends()[store.SandboxLocal],
			store.SandboxOpenSandbox: BackendOffer(sandbox.Capabilities{ProcessSessions: true, Pause: true}, true),
			"exec-only":              BackendOffer(sandbox.Capabilities{}, true),
		}
	})
	profile := func(backend, image string) map[string]any {
		return map[string]any{"name": "p-" + backend, "engine_kind": needsProcs, "sandbox_backend": backend, "image": image}
	}
	f.call("POST", "/api/v1/runtime-profiles", f.admin, profile("exec-only", "registry.example.com/astrabox/claude:1")).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "sandbox_tenancy", "requires process sessions")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, profile(store.SandboxOpenSandbox, "/srv/images/claude")).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "runtime_image", "image reference")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, profile("kubernetes", "registry.example.com/astrabox/claude:1")).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "sandbox_backend", "opensandbox")

	var p profileView
	f.call("POST", "/api/v1/runtime-profiles", f.admin, profile(store.SandboxOpenSandbox, "registry.example.com/astrabox/claude:1")).ok(t).into(t, &p)
	assert.Equal(t, store.SandboxOpenSandbox, p.SandboxBackend)
	assert.Equal(t, "registry.example.com/astrabox/claude:1", p.Image)
	// Moving it onto a backend that cannot serve the engine is refused too, and
	// leaves it as it was.
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"sandbox_backend": "exec-only"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "requires process sessions")
	var again profileView
	f.call("GET", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, nil).ok(t).into(t, &again)
	assert.Equal(t, store.SandboxOpenSandbox, again.SandboxBackend)

	var all []profileView
	f.call("GET", "/api/v1/runtime-profiles?include_disabled=true", f.admin, nil).ok(t).into(t, &all)
	assert.Len(t, all, 2, "the fixture's profile and the one accepted; refused requests stored nothing")
}
