package runnerhandle

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// unreachable is a handle whose runner socket does not exist, so every call
// fails in the transport, and which reports the box lost when lost is true.
func unreachable(t *testing.T, lost bool) (*Handle, *int) {
	asked := new(int)
	c := runnerapi.NewClient(filepath.Join(t.TempDir(), "none.sock"))
	h := New(c, func(context.Context, error) (string, bool) {
		*asked++
		return "runner_exited: gone", lost
	})
	return &h, asked
}

func TestWrapMarksLostBox(t *testing.T) {
	t.Parallel()
	h, _ := unreachable(t, true)
	err := h.Signal(context.Background(), "p1", "SIGTERM", false)
	if !errors.Is(err, sandbox.ErrBoxLost) {
		t.Fatalf("err = %v, want ErrBoxLost", err)
	}
	want := "signal: sandbox: box lost (runner_exited: gone): "
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %q, want prefix %q", err, want)
	}
}

func TestWrapKeepsLiveBoxError(t *testing.T) {
	t.Parallel()
	h, _ := unreachable(t, false)
	_, err := h.ReadFile(context.Background(), "/x")
	if err == nil || errors.Is(err, sandbox.ErrBoxLost) {
		t.Fatalf("err = %v, want a transport error not marked lost", err)
	}
	if !strings.HasPrefix(err.Error(), "read file: ") {
		t.Fatalf("err = %q, want prefix %q", err, "read file: ")
	}
	if h.Wrap(context.Background(), "op", nil) != nil {
		t.Fatal("Wrap of nil is not nil")
	}
}

func TestInvalidSpecNeverReachesRunner(t *testing.T) {
	t.Parallel()
	h, asked := unreachable(t, true)
	if _, err := h.StartProcess(context.Background(), sandbox.ProcessSpec{}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("StartProcess err = %v, want ErrInvalidSpec", err)
	}
	if _, err := h.StartTerminal(context.Background(), sandbox.TerminalSpec{ID: "t1", Cols: -1}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("StartTerminal err = %v, want ErrInvalidSpec", err)
	}
	if *asked != 0 {
		t.Fatalf("the box-lost check ran %d times for specs that were never sent", *asked)
	}
}
