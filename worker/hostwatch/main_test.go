package hostwatch_test

import (
	"testing"

	"github.com/astrabox/astrabox/internal/testutil"
)

// TestMain stops the PostgreSQL cluster the recorder's test starts.
func TestMain(m *testing.M) { testutil.Main(m) }
