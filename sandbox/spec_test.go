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
		"repeated port":      func(s *Spec) { s.Network.Forwards = []Forward{{Name: "a", Port: 1}, {Name: "b", Port: 1}} },
		"bad env":            func(s *Spec) { s.Env = map[string]string{"A=B": "x"} },
		"relative mount":     func(s *Spec) { s.Mounts = []Mount{{Source: "rel", Target: "/opt"}} },
		"service without id": func(s *Spec) { s.Services = []Service{{Process: ProcessSpec{Argv: []string{"x"}}}} },
		"negative limit":     func(s *Spec) { s.Limits.MemoryBytes = -1 },
		"network mode":       func(s *Spec) { s.Network.Mode = "bridge" },
		"upstream scheme": func(s *Spec) {
			s.Network.Forwards = []Forward{{Name: "tracing", Port: 1, Upstream: "file:///etc/passwd"}}
		},
		"upstream without host": func(s *Spec) { s.Network.Forwards = []Forward{{Name: "tracing", Port: 1, Upstream: "http:///x"}} },
		"upstream credential": func(s *Spec) {
			s.Network.Forwards = []Forward{{Name: "tracing", Port: 1, Upstream: "http://user:pw@collector:4318"}}
		},
		"relative path": func(s *Spec) {
			s.Network.Forwards = []Forward{{Name: "tracing", Port: 1, Upstream: "http://collector:4318", Paths: []string{"v1/traces"}}}
		},
	} {
		bad := Spec{}.WithDefaults()
		change(&bad)
		require.ErrorIs(t, bad.Validate(), ErrInvalidSpec, name)
	}
	good := Spec{}.WithDefaults()
	good.Network.Forwards = []Forward{{Name: "tracing", Port: 1, Upstream: "https://collector.example:4318/otlp", Paths: []string{"/v1/traces"}}}
	require.NoError(t, good.Validate())
}
