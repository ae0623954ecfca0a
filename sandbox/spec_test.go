package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSpecDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	s := Spec{}.WithDefaults()
	require.Equal(t, "/workspace", s.Workspace.MountPath)
	require.Equal(t, "/workspace/.home", s.Identity.Home)
	require.Equal(t, NetworkNone, s.Network.Mode)
	require.NoError(t, s.Validate())

	for name, change := range map[string]func(*Spec){
		"root workspace":     func(s *Spec) { s.Workspace.MountPath = "/" },
		"volume name":        func(s *Spec) { s.Workspace.Kind = WorkspacePersistent },
		"repeated port":      func(s *Spec) { s.Network.Forwards = []Forward{{"a", 1}, {"b", 1}} },
		"bad env":            func(s *Spec) { s.Env = map[string]string{"A=B": "x"} },
		"relative mount":     func(s *Spec) { s.Mounts = []Mount{{Source: "rel", Target: "/opt"}} },
		"service without id": func(s *Spec) { s.Services = []Service{{Process: ProcessSpec{Argv: []string{"x"}}}} },
		"negative limit":     func(s *Spec) { s.Limits.MemoryBytes = -1 },
		"network mode":       func(s *Spec) { s.Network.Mode = "bridge" },
	} {
		bad := Spec{}.WithDefaults()
		change(&bad)
		require.ErrorIs(t, bad.Validate(), ErrInvalidSpec, name)
	}
}
