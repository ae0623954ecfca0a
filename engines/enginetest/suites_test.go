package enginetest_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/enginetest"
)

// recordingTB is a testing.TB double that records failures instead of failing the test,
// so broken adapters can prove the suites fail.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Logf(format string, args ...any) {
	r.TB.Logf("(suite log) "+format, args...)
}
func (r *recordingTB) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recordingTB) Fail()                             { r.record("Fail") }
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recordingTB) FailNow() { r.record("FailNow"); runtime.Goexit() }

func (r *recordingTB) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

// failuresOf runs a suite against the double on its own goroutine (so FailNow can end
// it) and returns the recorded failures.
func failuresOf(t *testing.T, suite func(tb testing.TB)) []string {
	t.Helper()
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		suite(rec)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.failures)
}

func requireFailure(t *testing.T, failures []string, want string) {
	t.Helper()
	for _, f := range failures {
		if strings.Contains(f, want) {
			return
		}
	}
	t.Fatalf("no failure containing %q; failures: %q", want, failures)
}

func TestAdapterContractPassesFakeEngine(t *testing.T) {
	t.Parallel()
	enginetest.RunAdapterContract(t, newFakeAdapter())
	launch := serviceAdapter{newFakeAdapter(), engines.ConversationServiceLaunch{Command: []string{"fake-serve"}, Port: 7100}}
	enginetest.RunAdapterContract(t, launch)
}

func TestAdapterContractFailsBrokenAdapters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		adapter func() engines.EngineAdapter
		want    string
	}{
		{"nil", func() engines.EngineAdapter { return nil }, "adapter is nil"},
		{"incomplete workload", func() engines.EngineAdapter {
			a := newFakeAdapter()
			a.caps.Workload.ConfigDirEnv = ""
			return a
		}, "workload.config_dir_env: is empty"},
		{"default outside modes", func() engines.EngineAdapter {
			a := newFakeAdapter()
			a.caps.PermissionModeDefaults[engines.SessionKindAgentChat] = "never"
			return a
		}, `"never" is not a declared permission mode`},
		{"client misses declared optional members", func() engines.EngineAdapter {
			a := newFakeAdapter()
			a.clientType = reflect.TypeFor[*minimalClient]()
			return a
		}, "ServerInfoProvider"},
		{"sandbox environment carries the model key", func() engines.EngineAdapter {
			a := newFakeAdapter()
			a.sandbox.Environment = map[string]string{"FAKE_API_KEY": "sk-baked"}
			return a
		}, "sets FAKE_API_KEY"},
		{"service launch on box account without port", func() engines.EngineAdapter {
			a := newFakeAdapter()
			a.caps.ConversationPlacement = engines.PlacementBoxAccount
			return serviceAdapter{a, engines.ConversationServiceLaunch{Command: []string{"fake-serve"}}}
		}, "declares port 0"},
		{"pinned old seams version", func() engines.EngineAdapter {
			return pinned{newFakeAdapter(), 6}
		}, "pins seams API version 6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			failures := failuresOf(t, func(tb testing.TB) { enginetest.RunAdapterContract(tb, tc.adapter()) })
			requireFailure(t, failures, tc.want)
		})
	}
}

type pinned struct {
	*fakeAdapter
	v int
}

func (p pinned) SeamsAPIVersion() int { return p.v }

func TestRuntimeClientContractPassesFakeClient(t *testing.T) {
	t.Parallel()
	enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*fakeClient](),
		enginetest.WithCapabilities(newFakeAdapter().caps),
		enginetest.WithConnectedClient(func(testing.TB) engines.RuntimeClient { return newFakeClient("conv-1", fakeLog(t)) }))
}

func TestRuntimeClientContractFailsBrokenClients(t *testing.T) {
	t.Parallel()
	caps := newFakeAdapter().caps
	cases := []struct {
		name string
		run  func(tb testing.TB)
		want string
	}{
		{"no type", func(tb testing.TB) { enginetest.RunRuntimeClientContract(tb, nil) }, "no client type"},
		{"value type", func(tb testing.TB) {
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[fakeClient]())
		}, "declare the pointer type"},
		{"not a client", func(tb testing.TB) {
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[*strings.Builder]())
		}, "missing Submit"},
		{"wrong optional signature", func(tb testing.TB) {
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[wrongSignatureClient]())
		}, "SetPermissionMode has signature func(string)"},
		{"declared server info missing", func(tb testing.TB) {
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[*minimalClient](), enginetest.WithCapabilities(caps))
		}, "ServerInfoProvider"},
		{"events ignore cancellation and close keeps it live", func(tb testing.TB) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[*fakeClient](),
				enginetest.WithReturnWait(200*time.Millisecond),
				enginetest.WithConnectedClient(func(testing.TB) engines.RuntimeClient {
					return &stubbornClient{fakeClient: newFakeClient("conv-1", nil), release: release}
				}))
		}, "did not end within"},
		{"connected client of another conversation kind", func(tb testing.TB) {
			enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[*fakeClient](), enginetest.WithCapabilities(caps),
				enginetest.WithConnectedClient(func(testing.TB) engines.RuntimeClient { return newFakeClient("", nil) }))
		}, "no engine session key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireFailure(t, failuresOf(t, tc.run), tc.want)
		})
	}
	// Close keeping the client live is its own failure.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	failures := failuresOf(t, func(tb testing.TB) {
		enginetest.RunRuntimeClientContract(tb, reflect.TypeFor[*fakeClient](), enginetest.WithReturnWait(200*time.Millisecond),
			enginetest.WithConnectedClient(func(testing.TB) engines.RuntimeClient {
				return &stubbornClient{fakeClient: newFakeClient("conv-1", nil), release: release}
			}))
	})
	requireFailure(t, failures, "still live after Close")
}

func TestCursorDeterminismPassesFakeClient(t *testing.T) {
	t.Parallel()
	client := newFakeClient("conv-1", fakeLog(t))
	enginetest.CheckCursorDeterminism(t, fakeLog(t), client.Events, 0)
	enginetest.CheckClientCursorDeterminism(t, client, len(fakeLog(t)), 0)
}

func TestCursorDeterminismFailsBrokenReaders(t *testing.T) {
	t.Parallel()
	withRead := func(read func([]engines.Event, int) []engines.Event) *fakeClient {
		c := newFakeClient("conv-1", fakeLog(t))
		c.read = read
		c.once = true
		return c
	}
	nonPublic := fakeLog(t)
	out := nonPublic[4].(engines.ResponseOutput)
	out.Frame = out.Frame.Without("dynamic")
	nonPublic[4] = out
	invalidFrame := fakeLog(t)
	bad := invalidFrame[5].(engines.ResponseOutput)
	bad.Frame = bad.Frame.Without("output")
	invalidFrame[5] = bad
	cases := []struct {
		name      string
		recording []engines.Event
		client    *fakeClient
		want      string
	}{
		{"skips the event after the cursor", fakeLog(t), withRead(func(log []engines.Event, start int) []engines.Event {
			if start > 0 && start < len(log) {
				return log[start+1:]
			}
			return log[start:]
		}), "event 2 differs from the recording"},
		{"reorders after a cursor", fakeLog(t), withRead(func(log []engines.Event, start int) []engines.Event {
			rest := slices.Clone(log[start:])
			if start == 3 {
				rest[0], rest[1] = rest[1], rest[0]
			}
			return rest
		}), "reading after the cursor of event 2: event 3 differs"},
		{"ends early", fakeLog(t), withRead(func(log []engines.Event, start int) []engines.Event {
			return log[start : len(log)-1]
		}), "ended after"},
		{"frame the ai client rejects", invalidFrame, newFakeClient("conv-1", invalidFrame), "output is required"},
		{"recording with a non-public frame", nonPublic, newFakeClient("conv-1", nonPublic), "PublicFrame would change"},
		{"cursor from another generation", func() []engines.Event {
			log := fakeLog(t)
			ev := log[5].(engines.ResponseOutput)
			ev.Cursor = engines.RuntimeCursor{Generation: "fake-gen-0", Position: json.RawMessage("5")}
			log[5] = ev
			return log
		}(), newFakeClient("conv-1", fakeLog(t)), "runtime cursor expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			failures := failuresOf(t, func(tb testing.TB) {
				enginetest.CheckCursorDeterminism(tb, tc.recording, tc.client.Events, 5*time.Second)
			})
			requireFailure(t, failures, tc.want)
		})
	}
}

func TestRecordingRoundTrip(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := enginetest.WriteRecording(&b, fakeLog(t)); err != nil {
		t.Fatal(err)
	}
	back, err := enginetest.ReadRecording(strings.NewReader(b.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(fakeLog(t)) {
		t.Fatalf("read %d events, wrote %d", len(back), len(fakeLog(t)))
	}
	enginetest.CheckCursorDeterminism(t, back, newFakeClient("conv-1", fakeLog(t)).Events, 0)
	if _, err := enginetest.ReadRecording(strings.NewReader(`{"type":"nope"}`)); err == nil {
		t.Fatal("ReadRecording accepted an unknown event type")
	}
}

func TestFakeAdapterActivates(t *testing.T) {
	t.Parallel()
	a := newFakeAdapter()
	rt, err := a.ActivateRuntime(t.Context(), engines.EngineStartupContext{SessionID: "s1", AttachMode: engines.AttachRestore, ResumeSessionKey: "conv-7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt.EngineClient.EngineSessionKey() != "conv-7" {
		t.Fatalf("resumed %q, want conv-7", rt.EngineClient.EngineSessionKey())
	}
}
