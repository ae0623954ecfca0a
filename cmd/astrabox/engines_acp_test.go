package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/store"
)

// TestConfiguredACPProgramRegisters adds an ACP program by configuration alone: the
// registry validates it and the kind is offered; a bad profile stops the start, naming
// the entry and the field.
func TestConfiguredACPProgramRegisters(t *testing.T) {
	prog := config.ACPProgram{Kind: "my-agent", Command: []string{"/opt/my-agent/bin/my-agent", "--acp"},
		ModelKeyEnv: "OPENAI_API_KEY", ModelAPI: "openai", StateDir: ".my-agent", Busy: "queued",
		Admission: "prompt_reply", Resume: "load", Modes: []string{"ask", "auto"}, DefaultMode: "ask",
		Mounts: []config.ACPMount{{Source: "/opt/my-agent", Target: "/opt/my-agent"}}}
	installed, err := newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{prog}})
	require.NoError(t, err)
	adapter, ok := installed.registry.Adapter("my-agent")
	require.True(t, ok)
	require.Equal(t, []string{"ask", "auto"}, adapter.Capabilities().PermissionModes)
	require.Equal(t, acp.BusyQueued, adapter.(*acp.Adapter).Profile().Busy)
	require.NotEmpty(t, installed.forwards["my-agent"], "an OpenAI program gets the OpenAI forward")
	require.Len(t, installed.mounts["my-agent"], 1)

	gemini := prog
	gemini.Kind, gemini.ModelAPI, gemini.LoadAfterStartMinute, gemini.ModeUpdateText = "my-gemini-agent", "gemini", true, "[MODE_UPDATE] "
	installed, err = newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{gemini}})
	require.NoError(t, err)
	require.Equal(t, activities.GeminiModelForwardName, installed.forwards["my-gemini-agent"].Name, "a Gemini API program gets the Gemini forward")
	adapter, _ = installed.registry.Adapter("my-gemini-agent")
	require.True(t, adapter.(*acp.Adapter).Profile().LoadAfterStartMinute)
	require.Equal(t, "[MODE_UPDATE] ", adapter.(*acp.Adapter).Profile().ModeUpdateText)

	bad := prog
	bad.Busy = "sometimes"
	_, err = newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{bad}})
	require.ErrorContains(t, err, "engines.acp_programs[0]")
	require.ErrorContains(t, err, "busy")

	clash := prog
	clash.Kind = claude.EngineKind
	_, err = newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{clash}})
	require.Error(t, err, "a configured program cannot take a built-in kind")
}

// TestGeminiModelForward: the Gemini API forward sends the configured key as
// x-goog-api-key in place of the box's placeholder, for the API's model methods only.
func TestGeminiModelForward(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = io.WriteString(w, "{}")
	}))
	defer upstream.Close()
	routes, err := modelEgress(config.Models{AnthropicBaseURL: upstream.URL, OpenAIBaseURL: upstream.URL,
		GeminiBaseURL: upstream.URL, GeminiAPIKey: config.Secret("real-gemini-key")})
	require.NoError(t, err)
	proxy, err := routes[activities.GeminiModelForwardName].Proxy()
	require.NoError(t, err)
	front := httptest.NewServer(proxy)
	defer front.Close()

	post := func(path string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, front.URL+path, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("x-goog-api-key", activities.ModelPlaceholderKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, post("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"))
	require.Equal(t, []string{"real-gemini-key"}, (<-got).Values("x-goog-api-key"), "the placeholder is replaced")
	require.Equal(t, http.StatusOK, post("/v1beta/models/gemini-2.5-flash:countTokens"))
	<-got
	require.Equal(t, http.StatusForbidden, post("/v1beta/files"))
}

// TestRuntimeProfileACPProgramBox: the box of a RuntimeProfile that defines its ACP
// program is on the forward of the program's model API; image-less, it binds the pinned
// ACP installs the shipped ACP kinds run from, and with an image nothing of the host.
func TestRuntimeProfileACPProgramBox(t *testing.T) {
	t.Parallel()
	installed, err := newInstalledEngines(config.Engines{})
	require.NoError(t, err)
	require.True(t, installed.registry.DefinesProgram(acp.KindProgram))
	require.NotEmpty(t, installed.acpMounts, "run `make deps-acp-agents` and `make deps-agents`")
	profile := store.RuntimeProfile{ID: "p1", EngineKind: acp.KindProgram, SandboxBackend: store.SandboxLocal,
		ACPProgram: json.RawMessage(`{"command":["/usr/bin/node","/opt/astrabox/acp/node_modules/x.js"],"model_key_env":"GEMINI_API_KEY",` +
			`"model_api":"gemini","state_dir":".x","busy":"queued","admission":"prompt_reply","resume":"load"}`)}
	adapter, err := installed.registry.ProfileAdapter(profile.EngineKind, profile.ACPProgram)
	require.NoError(t, err)
	agent := store.Agent{ID: "a1", EngineKind: acp.KindProgram}

	spec, err := installed.spec(profile, agent, adapter)
	require.NoError(t, err)
	require.Equal(t, installed.acpMounts, spec.Mounts)
	require.Len(t, spec.Network.Forwards, 1)
	require.Equal(t, activities.GeminiModelForwardName, spec.Network.Forwards[0].Name)
	require.Equal(t, activities.ModelPlaceholderKey, spec.Env["GEMINI_API_KEY"])

	profile.Image = "/srv/images/acp"
	spec, err = installed.spec(profile, agent, adapter)
	require.NoError(t, err)
	require.Empty(t, spec.Mounts, "a profile's image holds its program")
}
