package codex_test

import (
	"testing"

	"github.com/astrabox/astrabox/internal/testutil"
)

// TestMain fails the package when a box its tests started is left running.
func TestMain(m *testing.M) { testutil.Main(m) }
