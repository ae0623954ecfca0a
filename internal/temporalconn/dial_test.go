package temporalconn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// dialTimeout bounds the retries of a dial that is meant to fail.
const dialTimeout = 2 * time.Second

// TestMutualTLS connects with temporal.tls.* to a frontend that requires a client
// certificate, and is refused without one.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, 2*time.Minute)
	pki := newTestPKI(t)
	addr := startTLSProxy(t, pki, testutil.TemporalDevServer(t).FrontendHostPort(), proxyAuth{clientCert: true})
	cfg := config.Temporal{Address: addr, Namespace: "default", TLS: config.TLS{
		Enabled: true, CertFile: pki.certFile, KeyFile: pki.keyFile, CAFile: pki.caFile, ServerName: pki.serverName}}

	c, err := temporalconn.Dial(ctx, cfg, testutil.Logger(t), time.Minute, temporalconn.Instruments{})
	require.NoError(t, err)
	defer c.Close()
	requireServes(t, c)

	noCert := cfg
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	_, err = temporalconn.Dial(ctx, noCert, testutil.Logger(t), dialTimeout, temporalconn.Instruments{})
	require.Error(t, err, "a frontend requiring mTLS refuses a client without a certificate")
	assert.Contains(t, err.Error(), addr)

	otherName := cfg
	otherName.TLS.ServerName = "elsewhere.test"
	_, err = temporalconn.Dial(ctx, otherName, testutil.Logger(t), dialTimeout, temporalconn.Instruments{})
	require.Error(t, err, "the server's certificate is checked against server_name")
}

// TestAPIKey connects with temporal.api_key over TLS (as to Temporal Cloud): every call
// carries the key, and a wrong key is refused.
func TestAPIKey(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, 2*time.Minute)
	pki := newTestPKI(t)
	addr := startTLSProxy(t, pki, testutil.TemporalDevServer(t).FrontendHostPort(), proxyAuth{apiKey: "key-for-tests"})
	cfg := config.Temporal{Address: addr, Namespace: "default", APIKey: config.Secret("key-for-tests"),
		TLS: config.TLS{Enabled: true, CAFile: pki.caFile, ServerName: pki.serverName}}

	c, err := temporalconn.Dial(ctx, cfg, testutil.Logger(t), time.Minute, temporalconn.Instruments{})
	require.NoError(t, err)
	defer c.Close()
	requireServes(t, c)

	wrong := cfg
	wrong.APIKey = config.Secret("not-the-key")
	_, err = temporalconn.Dial(ctx, wrong, testutil.Logger(t), dialTimeout, temporalconn.Instruments{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid API key")
}

// requireServes makes calls beyond the dial's own check through the connection.
func requireServes(t *testing.T, c client.Client) {
	t.Helper()
	ctx := testutil.ContextWithTimeout(t, time.Minute)
	_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Equal(t, "default", ns.GetNamespaceInfo().GetName())
}

// TestOptionsSendRequestsUncompressed: the platform's Temporal calls are small and
// go to a Temporal beside it, so the client does not gzip them.
func TestOptionsSendRequestsUncompressed(t *testing.T) {
	opts, err := temporalconn.Options(config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"}, zap.NewNop())
	require.NoError(t, err)
	require.IsType(t, &client.GrpcCompressionNone{}, opts.ConnectionOptions.GrpcCompression)
}
