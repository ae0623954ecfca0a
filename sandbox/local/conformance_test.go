package local

import (
	"testing"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestConformance runs the suite every sandbox backend passes.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Backend, sandbox.Spec) {
		return newBackend(t, testOptions(t)), sandbox.Spec{}
	})
}
