package activities_test

import (
	"bufio"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// servicePort is the port scriptagent's resident-service mode listens on.
const servicePort = 7311

// withEntryPoint is scriptagent with an image entry point (scriptagent's resident
// service) on a published readiness port; its activation reports what it read from
// that port and what dialling an unpublished port said.
type withEntryPoint struct {
	*scriptengine.Adapter
	servePort string // "fail" makes the service exit without listening
	greeting  string
	note      string
	reached   chan string
}

func (a withEntryPoint) SandboxRequest() engines.EngineSandboxRequest {
	req := a.Adapter.SandboxRequest()
	req.EntryPoint = []string{agentMount + "/scriptagent", "serve", a.servePort, a.greeting}
	req.Environment = map[string]string{"SCRIPTAGENT_SERVE_NOTE": a.note}
	req.PublishedPorts = []engines.PublishedPort{{Name: "control", Port: servicePort}}
	req.ReadinessPort = servicePort
	return req
}

func (a withEntryPoint) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	conn, err := box.DialPort(ctx, servicePort)
	if err != nil {
		return engines.SessionRuntime{}, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	_ = conn.Close()
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("read the service's greeting: %w", err)
	}
	_, unpublished := box.DialPort(ctx, servicePort+1)
	select {
	case a.reached <- line + fmt.Sprint(unpublished):
	default:
	}
	return a.Adapter.ActivateRuntime(ctx, sc, box)
}

func entryPointSetup(t *testing.T, servePort string) (engineSetup, withEntryPoint) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	adapter := withEntryPoint{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"},
		servePort: servePort, greeting: "hello-" + uniq(), note: "note-" + uniq(), reached: make(chan string, 1)}
	return engineSetup{kind: scriptengine.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: binDir, Target: agentMount}}}, adapter
}

// TestTheEntryPointServesAPublishedPortBeforeActivation: the engine's entry point
// runs in its box as a resident service that listens before activation starts (the
// readiness port is awaited), with the request's environment; the adapter reaches
// its published port through the box's relay and is refused an unpublished one.
func TestTheEntryPointServesAPublishedPortBeforeActivation(t *testing.T) {
	setup, adapter := entryPointSetup(t, fmt.Sprint(servicePort))
	s := newStackWith(t, setup)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))

	reached := <-adapter.reached
	require.Contains(t, reached, adapter.greeting+" "+adapter.note+"\n", "the service's greeting, with the request's environment")
	require.Contains(t, reached, fmt.Sprintf("dial port %d in box", servicePort+1))
	require.Contains(t, reached, "not published")
	h, err := s.backend.Get(s.ctx, *s.session(id).SandboxID)
	require.NoError(t, err)
	defer h.Close()
	st, err := h.Process(s.ctx, activities.EntryPointProcess)
	require.NoError(t, err)
	require.True(t, st.Running, "the entry point keeps running as the box's resident service")
	info, err := h.Info(s.ctx)
	require.NoError(t, err)
	require.Equal(t, id, info.Metadata[activities.SessionMetadata], "the box's metadata names its Session")
}

// TestAnEntryPointThatCannotServeStopsTheSessionAndSaysWhy: an entry point that exits
// before listening on its readiness port fails the box's start; the Session ends
// TERMINATED with the service's exit and output in its runtime_error, and the input
// stays in custody.
func TestAnEntryPointThatCannotServeStopsTheSessionAndSaysWhy(t *testing.T) {
	setup, _ := entryPointSetup(t, "fail")
	s := newStackWith(t, setup)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "quick")
	s.eventually("the Session to be terminated", func() bool { return s.session(id).Lifecycle == store.LifecycleTerminated })
	reason := *s.session(id).RuntimeError
	require.Contains(t, reason, `resident service "entrypoint" not ready on port 7311: exited with code 3 before listening`)
	require.Contains(t, reason, "no model configured, cannot serve")
	got, err := s.st.GetInputByID(s.ctx, in)
	require.NoError(t, err)
	require.NotEqual(t, store.InputAdmitted, got.State)
}
