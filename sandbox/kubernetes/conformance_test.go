package kubernetes

import (
	"testing"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestConformance runs the suite every sandbox backend passes against the
// fake cluster, whose simulated kubelet starts a real runner per Sandbox.
// Pause is declared false (suspending ends the pod), so the suite skips it.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Backend, sandbox.Spec) {
		c := newCluster(t, template("agents"))
		return newBackend(t, c, "astrabox"), sandbox.Spec{Image: sandbox.Image{URI: "registry.example/astrabox-box:1"}}
	})
}
