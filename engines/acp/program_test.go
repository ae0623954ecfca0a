package acp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
)

// TestParseProgram decodes a RuntimeProfile's ACP program strictly and refuses a bad
// definition naming the field.
func TestParseProgram(t *testing.T) {
	t.Parallel()
	good := map[string]any{"title": "My agent", "command": []string{"/opt/my-agent/bin/my-agent", "--acp"},
		"env": map[string]string{"MY_BASE_URL": "{model_base_url}"}, "model_key_env": "OPENAI_API_KEY", "model_api": "openai",
		"state_dir": ".my-agent", "modes": []string{"ask", "auto"}, "default_mode": "ask",
		"busy": "queued", "admission": "prompt_reply", "resume": "load", "mcp_transports": []string{"stdio"},
		"new_session_meta": map[string]any{"quiet": true}}
	raw, err := json.Marshal(good)
	require.NoError(t, err)
	prog, err := acp.ParseProgram(acp.KindProgram, raw)
	require.NoError(t, err)
	require.Equal(t, acp.ModelAPIOpenAI, prog.ModelAPI)
	profile := prog.Profile(acp.KindProgram)
	require.Equal(t, acp.KindProgram, profile.Kind)
	require.Equal(t, []string{"ask", "auto"}, profile.Modes)
	require.Equal(t, map[string]any{"quiet": true}, profile.NewSessionMeta)
	adapter, err := acp.NewAdapter(acp.Config{Profile: profile})
	require.NoError(t, err)
	require.NoError(t, engines.ValidateAdapter(acp.KindProgram, adapter), "the registry accepts the program's adapter")

	for name, tc := range map[string]struct {
		edit  func(m map[string]any)
		field string
	}{
		"missing command": {func(m map[string]any) { delete(m, "command") }, "command"},
		"bad busy":        {func(m map[string]any) { m["busy"] = "sometimes" }, "busy"},
		"bad model api":   {func(m map[string]any) { m["model_api"] = "cohere" }, "model_api"},
		"unknown field":   {func(m map[string]any) { m["kind"] = "other" }, "kind"},
		"wrong type":      {func(m map[string]any) { m["modes"] = "ask" }, "modes"},
		"state dir":       {func(m map[string]any) { m["state_dir"] = "/etc" }, "state_dir"},
	} {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		tc.edit(m)
		raw, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = acp.ParseProgram(acp.KindProgram, raw)
		var invalid *engines.ValidationError
		require.ErrorAs(t, err, &invalid, name)
		require.True(t, invalid.HasField(tc.field), "%s: %v", name, err)
	}
	for _, raw := range []string{``, `[]`, `"x"`, `{"command":["a"]} {}`} {
		_, err := acp.ParseProgram(acp.KindProgram, json.RawMessage(raw))
		require.ErrorIs(t, err, engines.ErrInvalid, raw)
	}
}
