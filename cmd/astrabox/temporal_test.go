package main

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/testsuite"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/workflows"
)

// TestTemporalSetupRegistersSearchAttributesOnce runs `astrabox temporal setup` against a
// dev server started without the Session workflows' search attributes: the first run
// adds them, a second finds them and changes nothing.
func TestTemporalSetupRegistersSearchAttributesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, 3*time.Minute)
	cli, err := testutil.TemporalCLIPath()
	require.NoError(t, err)
	// A server of its own: the package's shared one registers the attributes at start.
	server, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{ExistingPath: cli, LogLevel: "error", Stdout: io.Discard, Stderr: os.Stderr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Stop() })

	setup := func() string {
		t.Helper()
		var out bytes.Buffer
		root := newRootCommand()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"temporal", "setup", "--temporal-address", server.FrontendHostPort(), "--log-level", "error"})
		require.NoError(t, root.ExecuteContext(ctx), out.String())
		return out.String()
	}
	first := setup()
	for name := range workflows.SearchAttributeNames() {
		assert.Contains(t, first, "added search attribute "+name+"\n")
	}
	second := setup()
	for name := range workflows.SearchAttributeNames() {
		assert.Contains(t, second, "search attribute "+name+" already registered\n")
	}
	assert.NotContains(t, second, "added")

	listed, err := server.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	for name := range workflows.SearchAttributeNames() {
		assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, listed.GetCustomAttributes()[name], name)
	}

}
