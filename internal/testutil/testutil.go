// Package testutil provides the shared fixtures of integration tests: a PostgreSQL
// cluster per test package process with a fresh database per test cloned from a
// migrated template, a Temporal dev server per test package process, and contexts
// whose deadlines follow the test's.
//
// A package using NewDB or TemporalDevServer calls Main from its TestMain so the
// cluster and server stop when its tests end.
package testutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/testutil/boxroot"
)

// DefaultTimeout bounds a test context when the test has no sooner deadline.
const DefaultTimeout = 2 * time.Minute

// deadlineMargin leaves the test time to clean up and report before go test's own
// timeout would kill the whole binary.
const deadlineMargin = 10 * time.Second

// Main runs the package's tests, then stops the shared cluster and dev server,
// and fails the package when a box its tests started (localtest) is still running
// or left its folders behind:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.shutdown()
	os.Exit(checkBoxes(code))
}

// checkBoxes runs boxroot's leak check and turns a leak into a failed package.
func checkBoxes(code int) int {
	if err := boxroot.Finish(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// MainNoLeaks is Main for packages that own goroutines (listeners, followers):
// after the tests pass and the fixtures stop, any goroutine still running fails
// the package.
//
//	func TestMain(m *testing.M) { testutil.MainNoLeaks(m) }
func MainNoLeaks(m *testing.M) {
	code := checkBoxes(m.Run())
	shared.shutdown()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Context returns a context that ends with the test, at the latest after
// DefaultTimeout or shortly before the test binary's deadline.
func Context(t testing.TB) context.Context {
	t.Helper()
	return ContextWithTimeout(t, DefaultTimeout)
}

// ContextWithTimeout is Context with another upper bound.
func ContextWithTimeout(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := dt.Deadline(); ok {
			timeout = min(timeout, time.Until(deadline)-deadlineMargin)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// Logger returns a zap logger writing through t.Log.
func Logger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
}
