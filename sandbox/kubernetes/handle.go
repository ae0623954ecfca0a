package kubernetes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
	"github.com/astrabox/astrabox/sandbox/runnerhandle"
)

// handle drives one box through its runner, over TCP to the Sandbox's service.
// The runner calls are runnerhandle's; a failed one asks the cluster whether
// the box is lost.
type handle struct {
	runnerhandle.Handle
	b  *Backend
	id string
}

var _ sandbox.Handle = (*handle)(nil)

func (b *Backend) newHandle(id string, c *runnerapi.Client) *handle {
	lost := func(context.Context, error) (string, bool) { return b.boxLost(id) }
	return &handle{Handle: runnerhandle.New(c, lost), b: b, id: id}
}

// runnerConfigOf reads the runner configuration from a box's Secret: from data
// (base64, as the API server stores it) or stringData (as written).
func runnerConfigOf(secret *unstructured.Unstructured) (runnerapi.Config, error) {
	var cfg runnerapi.Config
	var raw []byte
	if enc, ok, _ := unstructured.NestedString(secret.Object, "data", runnerConfigKey); ok {
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return cfg, fmt.Errorf("Secret %s: %s is not base64: %w", secret.GetName(), runnerConfigKey, err)
		}
		raw = dec
	} else if s, ok, _ := unstructured.NestedString(secret.Object, "stringData", runnerConfigKey); ok {
		raw = []byte(s)
	} else {
		return cfg, fmt.Errorf("Secret %s has no %s", secret.GetName(), runnerConfigKey)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("Secret %s: decode %s: %w", secret.GetName(), runnerConfigKey, err)
	}
	if cfg.Token == "" {
		return cfg, fmt.Errorf("Secret %s: the runner has no token", secret.GetName())
	}
	return cfg, nil
}

// boxLost tells runnerhandle whether box id is gone: its Sandbox is missing or has
// a death. It is asked only when a call failed, and asks the cluster with a
// context of its own, since the failed call's may have ended.
func (b *Backend) boxLost(id string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, serr := b.observe(ctx, id)
	switch {
	case errors.Is(serr, sandbox.ErrNotFound):
		return "its Sandbox is gone", true
	case serr == nil && st.death != nil:
		return runnerhandle.DeathReason(st.death), true
	}
	return "", false
}

// The methods below implement sandbox.Handle (documented there).

func (h *handle) ID() string { return h.id }

func (h *handle) Close() error { return h.Client().Close() }

func (h *handle) Info(ctx context.Context) (sandbox.Info, error) {
	st, err := h.b.observe(ctx, h.id)
	if err != nil {
		return sandbox.Info{}, err
	}
	in := st.info()
	if in.State == sandbox.StateRunning {
		if ri, err := h.Client().Info(ctx); err == nil {
			in.BootID = ri.BootID
		}
	}
	return in, nil
}
