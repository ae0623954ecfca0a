package activities_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// stateBlob is the name the stateful engine saves its native state under.
const stateBlob = "transcript"

// statefulScript is scriptagent declaring runtime_state_store instead of a session
// log: its transcript is native state it saves through the platform's runtime-state
// capability when the platform asks, and writes back into a replacement box before
// the program resumes there.
type statefulScript struct {
	*scriptengine.Adapter
	owners chan string
	// saves, when set, counts save attempts (by box) and fails the first failSaves.
	saves *saveLog
}

// saveLog records the boxes save attempts were made in.
type saveLog struct {
	mu        sync.Mutex
	boxes     []string
	failSaves int
}

func (l *saveLog) attempt(box string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.boxes = append(l.boxes, box)
	if len(l.boxes) <= l.failSaves {
		return errors.New("profile archive not acknowledged")
	}
	return nil
}

func (l *saveLog) attempts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.boxes)
}

func (a statefulScript) Capabilities() engines.EngineRuntimeCapabilities {
	caps := a.Adapter.Capabilities()
	caps.SessionLog = nil
	caps.RuntimeStateStore = true
	caps.RuntimeStateScope = engines.RuntimeStateScopeSession
	return caps
}

func (a statefulScript) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{RuntimeStateStorage: true}
}

func (a statefulScript) EngineClientType() reflect.Type { return reflect.TypeFor[*statefulClient]() }

func (a statefulScript) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	cred, ok := sc.CallbackCredential(engines.CallbackRuntimeStateStorage)
	if !ok || cred.RuntimeState == nil {
		return engines.SessionRuntime{}, errors.New("no runtime-state storage in the startup material")
	}
	select {
	case a.owners <- cred.Owner:
	default:
	}
	key := sc.ResumeSessionKey
	if key == "" {
		key = "conv-" + sc.SessionID
	}
	path := scriptengine.TranscriptPath(sc.RuntimeIdentity, key)
	data, gen, err := cred.RuntimeState.Load(ctx, stateBlob)
	switch {
	case errors.Is(err, engines.ErrNoRuntimeState):
	case err != nil:
		return engines.SessionRuntime{}, err
	case sc.AttachMode == engines.AttachRestore:
		// The restore barrier: the state is back before the program resumes.
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, path, data, 0o600); err != nil {
			return engines.SessionRuntime{}, err
		}
	}
	rt, err := a.Adapter.ActivateRuntime(ctx, sc, box)
	if err != nil {
		return rt, err
	}
	rt.EngineClient = &statefulClient{Client: rt.EngineClient.(*scriptengine.Client), box: box, identity: sc.RuntimeIdentity,
		path: path, storage: cred.RuntimeState, generation: gen, saves: a.saves}
	return rt, nil
}

// statefulClient saves the transcript as the engine's native state.
type statefulClient struct {
	*scriptengine.Client
	box        engines.Box
	identity   *engines.RuntimeIdentity
	path       string
	storage    engines.RuntimeStateStorage
	generation int64
	saves      *saveLog
}

func (c *statefulClient) SaveRuntimeState(ctx context.Context) error {
	// The read is from the box: it fails once the box is gone.
	data, err := c.box.ReadFile(ctx, c.identity, c.path)
	if err != nil {
		return err
	}
	if c.saves != nil {
		if err := c.saves.attempt(c.box.ID()); err != nil {
			return err
		}
	}
	gen, err := c.storage.Save(ctx, stateBlob, c.generation, data)
	if err != nil {
		return err
	}
	c.generation = gen
	return nil
}

// TestRuntimeStateStoreIsSavedBeforeReleaseAndRestoredInTheNextBox: for an engine
// declaring runtime_state_store, the platform issues a runtime-state capability owned
// by the Session (its declared scope), has the client save its native state before the
// idle box is released, and the next box gets it back before the program resumes:
// the new box's transcript holds the first input.
func TestRuntimeStateStoreIsSavedBeforeReleaseAndRestoredInTheNextBox(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	adapter := statefulScript{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, owners: make(chan string, 1)}
	s := newStackWith(t, engineSetup{kind: scriptengine.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: binDir, Target: agentMount}}})
	s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, IdleRelease: 2 * time.Second})
	id := s.newSession()

	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	require.Equal(t, "session:"+id, <-adapter.owners)
	firstBox := *s.session(id).SandboxID
	s.eventually("the idle box to be released", func() bool { return s.session(id).RuntimeUnavailable })
	blob, err := s.st.GetRuntimeStateBlob(s.ctx, "session", id, stateBlob)
	require.NoError(t, err, "the state was saved before the release")
	require.Contains(t, string(blob.Data), first)

	second := s.send(id, "quick")
	s.waitEnded(id, "resp-"+second)
	sess := s.session(id)
	require.NotEqual(t, firstBox, *sess.SandboxID)
	h, err := s.backend.Get(s.ctx, *sess.SandboxID)
	require.NoError(t, err)
	defer h.Close()
	data, err := h.ReadFile(s.ctx, scriptengine.TranscriptPath(&engines.RuntimeIdentity{HomeDir: "/workspace/.home"}, *sess.EngineSessionKey))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(data), first) && strings.Contains(string(data), second),
		"the restored transcript holds both inputs:\n%s", data)
	streams, err := s.st.ListSessionLogStreams(s.ctx, id)
	require.NoError(t, err)
	require.Empty(t, streams, "no session log is declared: the runtime-state store carried it")
}

// saveRequiredOnce is scriptagent failing its first activation with
// RuntimeStateSaveRequired; the next activation waits for proceed, so the test reads
// the error the first left on the Session before the next clears it.
type saveRequiredOnce struct {
	*scriptengine.Adapter
	failed  chan struct{}
	proceed chan struct{}
}

func (a saveRequiredOnce) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	select {
	case a.failed <- struct{}{}:
		return engines.SessionRuntime{}, &engines.RuntimeStateSaveRequired{SandboxID: box.ID(), RuntimeIdentity: *sc.RuntimeIdentity,
			Cause: errors.New("profile archive not acknowledged")}
	default:
	}
	select {
	case <-a.proceed:
	case <-ctx.Done():
		return engines.SessionRuntime{}, ctx.Err()
	}
	return a.Adapter.ActivateRuntime(ctx, sc, box)
}

// TestRuntimeStateSaveRequiredKeepsTheBox: an activation failed with
// RuntimeStateSaveRequired keeps its box (the next activation happens in the same
// box), and the Session's runtime_error said which box and account until then.
func TestRuntimeStateSaveRequiredKeepsTheBox(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	adapter := saveRequiredOnce{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, failed: make(chan struct{}, 1), proceed: make(chan struct{})}
	s := newStackWith(t, engineSetup{kind: scriptengine.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: binDir, Target: agentMount}}})
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "quick")
	var reason string
	s.eventually("the save-required error on the Session", func() bool {
		if e := s.session(id).RuntimeError; e != nil {
			reason = *e
		}
		return reason != ""
	})
	box := *s.session(id).SandboxID
	require.Contains(t, reason, "box "+box)
	require.Contains(t, reason, "account agent")
	require.Contains(t, reason, "profile archive not acknowledged")
	close(adapter.proceed)
	s.waitEnded(id, "resp-"+in)
	sess := s.session(id)
	require.Equal(t, box, *sess.SandboxID, "the same box, kept for the save")
	require.Equal(t, int64(1), sess.RuntimeGeneration, "no replacement box was placed")
	require.Nil(t, sess.RuntimeError, "cleared once a runtime started")
	require.Equal(t, store.LifecycleActive, sess.Lifecycle)
}

// TestAFailedSaveKeepsTheIdleBox: when the client's save before an idle release fails,
// the box is not released: the platform reconnects to it and, at the next idle period,
// saves from that same box (its native state still there) and only then releases it.
func TestAFailedSaveKeepsTheIdleBox(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	saves := &saveLog{failSaves: 1}
	adapter := statefulScript{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, owners: make(chan string, 1), saves: saves}
	s := newStackWith(t, engineSetup{kind: scriptengine.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: binDir, Target: agentMount}}})
	s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, IdleRelease: 2 * time.Second})
	id := s.newSession()

	in := s.send(id, "quick")
	s.waitEnded(id, "resp-"+in)
	box := *s.session(id).SandboxID
	s.eventually("the idle box to be released", func() bool { return s.session(id).RuntimeUnavailable })
	require.Equal(t, []string{box, box}, saves.attempts(), "the failed save and the one that succeeded, both in the first box")
	blob, err := s.st.GetRuntimeStateBlob(s.ctx, "session", id, stateBlob)
	require.NoError(t, err)
	require.Contains(t, string(blob.Data), in)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "no other box was placed")
}
