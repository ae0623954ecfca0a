package temporalconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// The Temporal CLI's dev server speaks plain gRPC only (start-dev has no TLS flags),
// so these tests put a TLS-terminating HTTP/2 reverse proxy in front of it, which
// stands in for a production frontend or Temporal Cloud: it demands a client
// certificate signed by its CA (mTLS), or a bearer API key, before it forwards a call.

// testPKI is a CA with a server certificate for serverName and a client certificate,
// written as PEM files.
type testPKI struct {
	dir        string
	serverName string
	caFile     string
	certFile   string
	keyFile    string
	caPool     *x509.CertPool
	server     tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), serverName: "frontend.temporal.test"}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	p.caFile = p.writePEM(t, "ca.pem", "CERTIFICATE", caDER)

	issue := func(serial int64, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "astrabox test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return der, key
	}
	serverDER, serverKey := issue(2, x509.ExtKeyUsageServerAuth, []string{p.serverName})
	p.server = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}
	clientDER, clientKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	p.certFile = p.writePEM(t, "client.pem", "CERTIFICATE", clientDER)
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	require.NoError(t, err)
	p.keyFile = p.writePEM(t, "client-key.pem", "PRIVATE KEY", keyDER)
	return p
}

func (p *testPKI) writePEM(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
	return path
}

// proxyAuth is what the proxy demands of a caller.
type proxyAuth struct {
	clientCert bool   // a client certificate signed by the CA (mTLS)
	apiKey     string // "Authorization: Bearer <apiKey>" on every call
}

// startTLSProxy serves TLS on a free port and forwards every gRPC call that passes
// auth to the plain dev server at backend, returning the proxy's host:port.
func startTLSProxy(t *testing.T, pki *testPKI, backend string, auth proxyAuth) string {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: backend}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.FlushInterval = -1            // stream gRPC frames as they come
	forward.Transport = &http2.Transport{ // h2c to the dev server
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+auth.apiKey {
			// gRPC status 16 UNAUTHENTICATED, as a frontend answers a bad API key.
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "16")
			w.Header().Set("Grpc-Message", "invalid API key")
			w.WriteHeader(http.StatusOK)
			return
		}
		forward.ServeHTTP(w, r)
	})
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{pki.server}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if auth.clientCert {
		tlsCfg.ClientAuth = tls.RequireAndVerifyClientCert
		tlsCfg.ClientCAs = pki.caPool
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: handler, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	require.NoError(t, http2.ConfigureServer(srv, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tls.NewListener(ln, tlsCfg))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}
