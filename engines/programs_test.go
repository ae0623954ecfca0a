package engines_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// TestProfileAdapter resolves RuntimeProfiles to adapters: an installed kind's
// registered adapter, a program kind's adapter built from the profile's definition,
// and a refusal naming the field for a missing, superfluous or refused definition.
func TestProfileAdapter(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register("example", validAdapter("example")))
	// The builder takes the definition's modes; a definition without modes is refused
	// naming the definition's own field.
	require.NoError(t, reg.RegisterProgramKind("generic", func(kind string, program json.RawMessage) (engines.EngineAdapter, error) {
		var def struct {
			Modes []string `json:"modes"`
		}
		if err := json.Unmarshal(program, &def); err != nil {
			return nil, err
		}
		if len(def.Modes) == 0 {
			return nil, &engines.ValidationError{Subject: "program", Problems: []engines.Problem{{Field: "modes", Message: "is empty"}}}
		}
		a := validAdapter(kind)
		a.caps.PermissionModes = def.Modes
		a.caps.PermissionModeDefaults = map[engines.SessionKind]string{engines.SessionKindAgentChat: def.Modes[0]}
		return a, nil
	}))
	require.Equal(t, []string{"example", "generic"}, reg.Kinds())
	require.True(t, reg.DefinesProgram("generic"))
	require.False(t, reg.DefinesProgram("example"))
	_, ok := reg.Adapter("generic")
	require.False(t, ok, "a program kind has no adapter of its own")

	a, err := reg.ProfileAdapter("example", nil)
	require.NoError(t, err)
	require.Equal(t, "example", a.Capabilities().EngineKind)

	a, err = reg.ProfileAdapter("generic", json.RawMessage(`{"modes":["ask","auto"]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"ask", "auto"}, a.Capabilities().PermissionModes)

	_, err = reg.ProfileAdapter("missing", nil)
	require.ErrorIs(t, err, engines.ErrNotInstalled)
	for name, tc := range map[string]struct {
		kind    string
		program string
		field   string
	}{
		"no definition":                      {"generic", ``, "program"},
		"null definition":                    {"generic", `null`, "program"},
		"a definition for an installed kind": {"example", `{"modes":["ask"]}`, "program"},
		"a refused definition":               {"generic", `{"modes":[]}`, "program.modes"},
	} {
		_, err := reg.ProfileAdapter(tc.kind, json.RawMessage(tc.program))
		var invalid *engines.ValidationError
		require.True(t, errors.As(err, &invalid), "%s: %v", name, err)
		require.True(t, invalid.HasField(tc.field), "%s: %v", name, err)
	}

	require.Error(t, reg.RegisterProgramKind("example", nil), "a builder is required")
	require.Error(t, reg.RegisterProgramKind("example", func(string, json.RawMessage) (engines.EngineAdapter, error) { return nil, nil }),
		"an installed kind cannot become a program kind")
	err = reg.Register("generic", validAdapter("generic"))
	requireProblem(t, err, "generic", "engine_kind", "already registered")
}

// TestRuntimeProfileWithoutImageOnTheHostSystem: a profile may omit its image where the
// backend runs image-less boxes on the host system, and nowhere else.
func TestRuntimeProfileWithoutImageOnTheHostSystem(t *testing.T) {
	t.Parallel()
	a := validAdapter("noimage")
	a.caps.DefaultRuntimeImage = ""
	spec := engines.RuntimeProfileSpec{EngineKind: "noimage", SandboxTenancy: engines.TenancyConversation,
		Backend: engines.SandboxBackendCapabilities{SupportsProcessSessions: true}}
	err := engines.ValidateRuntimeProfileOf(a, spec)
	var invalid *engines.ValidationError
	require.True(t, errors.As(err, &invalid))
	require.True(t, invalid.HasField("runtime_image"))
	spec.Backend.RunsHostSystem = true
	require.NoError(t, engines.ValidateRuntimeProfileOf(a, spec))
}
