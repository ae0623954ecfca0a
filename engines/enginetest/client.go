package enginetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// ClientOption configures RunRuntimeClientContract.
type ClientOption func(*clientConfig)

type clientConfig struct {
	caps    *engines.EngineRuntimeCapabilities
	factory func(testing.TB) engines.RuntimeClient
	wait    time.Duration
}

// WithCapabilities checks the client type against the optional members the
// declaration implies (PermissionModeSetter, ServerInfoProvider, ChildRunStopper).
func WithCapabilities(caps engines.EngineRuntimeCapabilities) ClientOption {
	return func(c *clientConfig) { c.caps = &caps }
}

// WithConnectedClient adds checks on a connected client the factory returns (for
// example one over a scripted vendor): it is live with a conversation key, its manifest
// matches, Events honours a cancelled context, and Close ends liveness.
func WithConnectedClient(factory func(testing.TB) engines.RuntimeClient) ClientOption {
	return func(c *clientConfig) { c.factory = factory }
}

// WithReturnWait bounds how long the connected-client checks wait for a call that must
// return promptly (default 5s).
func WithReturnWait(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.wait = d }
}

// RunRuntimeClientContract checks that a runtime client type serves the whole runtime
// contract: it implements RuntimeClient (each missing or mistyped method is named), it
// is a pointer type (a client holds connection state), no method carries an optional
// member's name with another signature (it would silently never be called), and with
// WithCapabilities it implements the optional members the declaration needs.
func RunRuntimeClientContract(t testing.TB, clientType reflect.Type, opts ...ClientOption) {
	t.Helper()
	cfg := clientConfig{wait: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if clientType == nil {
		t.Errorf("runtime client contract: no client type")
		return
	}
	caps := engines.EngineRuntimeCapabilities{}
	if cfg.caps != nil {
		caps = *cfg.caps
	}
	for _, err := range unwrapJoined(engines.CheckClientType(clientType, caps)) {
		t.Errorf("runtime client contract: %v", err)
	}
	if clientType.Kind() != reflect.Pointer {
		t.Errorf("runtime client contract: %s is not a pointer type; a client holds one connection's state", clientType)
	}
	for _, m := range engines.MismatchedOptionalMethods(clientType) {
		t.Errorf("runtime client contract: %s: %s", clientType, m)
	}
	if cfg.caps != nil {
		declared := map[reflect.Type]bool{
			reflect.TypeFor[engines.ServerInfoProvider](): caps.SupportsServerInfo,
			reflect.TypeFor[engines.ChildRunStopper]():    caps.SupportsChildRunStop,
		}
		for iface, isDeclared := range declared {
			if clientType.Implements(iface) && !isDeclared {
				t.Logf("runtime client contract: %s implements %s, but the capabilities do not declare it, so the platform treats it as not applicable", clientType, iface)
			}
		}
	}
	if cfg.factory != nil {
		checkConnected(t, cfg, caps)
	}
}

func checkConnected(t testing.TB, cfg clientConfig, caps engines.EngineRuntimeCapabilities) {
	t.Helper()
	client := cfg.factory(t)
	if client == nil {
		t.Errorf("runtime client contract: factory returned nil")
		return
	}
	if !client.IsLive() {
		t.Errorf("runtime client contract: a connected client is not live")
	}
	if client.EngineKind() == "" || (cfg.caps != nil && client.EngineKind() != caps.EngineKind) {
		t.Errorf("runtime client contract: engine kind %q, declared %q", client.EngineKind(), caps.EngineKind)
	}
	if client.EngineSessionKey() == "" {
		t.Errorf("runtime client contract: a connected client has no engine session key")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.wait)
	defer cancel()
	manifest, err := client.Capabilities(ctx)
	switch {
	case err != nil:
		t.Errorf("runtime client contract: capabilities: %v", err)
	case manifest.EngineKind != client.EngineKind():
		t.Errorf("runtime client contract: manifest engine kind %q, client %q", manifest.EngineKind, client.EngineKind())
	case len(manifest.InputContentTypes) == 0:
		t.Errorf("runtime client contract: manifest lists no input content types")
	}
	if cfg.caps != nil && err == nil {
		if _, err := engines.InitializeRuntimeClient(ctx, client, caps, client.EngineSessionKey()); err != nil {
			t.Errorf("runtime client contract: %v", err)
		}
	}

	// Events must end when its context ends: the reader cancels it to hand over.
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range client.Events(cancelled, nil) {
		}
	}()
	select {
	case <-done:
	case <-time.After(cfg.wait):
		t.Errorf("runtime client contract: Events did not end within %s of its context being cancelled", cfg.wait)
	}

	if err := client.Close(); err != nil {
		t.Errorf("runtime client contract: close: %v", err)
	}
	if client.IsLive() {
		t.Errorf("runtime client contract: client is still live after Close")
	}
}

func unwrapJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
