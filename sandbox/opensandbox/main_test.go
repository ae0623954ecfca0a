package opensandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/internal/testutil/boxroot"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
	"github.com/astrabox/astrabox/sandbox/opensandbox/osbfake"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestMain checks that no runner a test started outlives the tests.
func TestMain(m *testing.M) { testutil.Main(m) }

const testKey = "osb-test-key"

// programUID is the program account of the fake's boxes, above the ranges
// the local backends' tests use.
const programUID = 460000

// image is the reference the tests' boxes name; the fake runs the runner
// built for the tests whatever it says.
const image = "registry.example/astrabox/claude:test"

// newFake starts a fake server whose boxes are runner processes on this host,
// and fails the test if any request or response did not match the document.
func newFake(t *testing.T) *osbfake.Fake {
	t.Helper()
	localtest.RequireBoxes(t) // root, to run programs as their own account
	root, err := boxroot.StateDir()
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o711))
	f, err := osbfake.New(osbfake.HostRunner{Runner: localtest.Runner(t), Root: root}, testKey)
	require.NoError(t, err)
	t.Cleanup(func() {
		f.Close()
		require.Empty(t, f.Violations(), "every request and response matches the OpenAPI document")
		_ = os.RemoveAll(root)
	})
	return f
}

// testOptions are options for a backend on f, with short intervals.
func testOptions(t *testing.T, f *osbfake.Fake) Options {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	return Options{URL: f.URL, APIKey: testKey, RunnerKey: []byte("0123456789abcdef-test-runner-key"),
		Deployment: "test-" + hex.EncodeToString(raw[:]), ProgramUID: programUID, ProgramGID: programUID,
		PollInterval: 50 * time.Millisecond, RetryBackoff: 20 * time.Millisecond, ReadyTimeout: 30 * time.Second,
		RequestTimeout: 10 * time.Second, Logger: testutil.Logger(t)}
}

func newBackend(t *testing.T, opts Options) *Backend {
	t.Helper()
	b, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func testSpec() sandbox.Spec {
	return sandbox.Spec{Image: sandbox.Image{URI: image}}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConformance runs the suite every sandbox backend passes against the
// spec-validating fake.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Backend, sandbox.Spec) {
		f := newFake(t)
		return newBackend(t, testOptions(t, f)), testSpec()
	})
}
