// Package temporalconn opens the process's Temporal client from configuration:
// TLS, API key, the shared zap logger, and a bounded retry at start so a
// frontend that is still coming up does not fail the process at once.
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/logging"
)

// Instruments are the client's observability hooks: the SDK's metrics handler and
// client interceptors (tracing). Workers made from the client inherit both.
type Instruments struct {
	MetricsHandler client.MetricsHandler
	Interceptors   []interceptor.ClientInterceptor
}

// Dial connects to Temporal, retrying until timeout. The error after the last
// attempt names the address and the cause.
func Dial(ctx context.Context, cfg config.Temporal, log *zap.Logger, timeout time.Duration, inst Instruments) (client.Client, error) {
	opts, err := Options(cfg, log)
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = inst.MetricsHandler
	opts.Interceptors = inst.Interceptors
	deadline := time.Now().Add(timeout)
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := client.DialContext(attemptCtx, opts)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("connect to Temporal at %s (namespace %s) after %d attempts: %w", cfg.Address, cfg.Namespace, attempt, err)
		}
		log.Debug("temporal not reachable yet", zap.String("address", cfg.Address), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.Address, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// Options builds client options from configuration.
func Options(cfg config.Temporal, log *zap.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  cfg.Address,
		Namespace: cfg.Namespace,
		Logger:    logging.NewTemporal(log.Named("temporal")),
		// The SDK gzips every request by default (and the server answers in kind).
		// The platform's calls are small signals, heartbeats and task polls to a
		// Temporal in the same cluster: compressing them costs CPU on both sides
		// and saves no time.
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}},
	}
	if cfg.APIKey.IsSet() {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.APIKey.Reveal())
	}
	if cfg.TLS.Enabled {
		tlsCfg, err := tlsConfig(cfg.TLS)
		if err != nil {
			return client.Options{}, err
		}
		opts.ConnectionOptions.TLS = tlsCfg
	}
	return opts, nil
}

func tlsConfig(cfg config.TLS) (*tls.Config, error) {
	out := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load temporal.tls.cert_file and key_file: %w", err)
		}
		out.Certificates = []tls.Certificate{pair}
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read temporal.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("temporal.tls.ca_file: no PEM certificates found")
		}
		out.RootCAs = pool
	}
	return out, nil
}
