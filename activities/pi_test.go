package activities_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/store"
)

// piMount is where boxes see the pinned Pi's node_modules (Node resolves Pi's
// dependencies from a folder of that name).
const piMount = "/opt/pi/node_modules"

// newPiStack runs the real pinned Pi in rpc mode in local boxes, reaching the
// in-process scripted model's Anthropic Messages API through the host-side
// credential proxy, in the platform extension's allow-all mode.
func newPiStack(t *testing.T) (*stack, *devmodel.Server) {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Pi)
	require.NoError(t, err, "run `make deps-agents`")
	rel, err := filepath.Rel(prog.Dir, prog.Command[1])
	require.NoError(t, err)
	model := devmodel.New(devmodel.Options{SlowDelay: 100 * time.Millisecond})
	require.NoError(t, model.Start(t.Context(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	s := newStackWith(t, engineSetup{
		kind: pi.EngineKind,
		adapter: pi.NewAdapter(pi.Config{Command: []string{prog.Command[0], filepath.Join(piMount, rel)}, Version: prog.Version,
			ModelBaseURL: fmt.Sprintf("http://127.0.0.1:%d", activities.ModelForwardPort), Model: "devmodel"}),
		mounts: []sandbox.Mount{{Source: prog.Dir, Target: piMount}},
		egress: map[string]egress.Route{activities.ModelForwardName: {Upstream: model.URL(),
			Headers: map[string]string{"x-api-key": "sk-host-side"}}},
	})
	return s, model
}

// piSession is a new Session in the extension's allow-all mode.
func (s *stack) piSession() string {
	id := s.newSession()
	_, err := s.st.SetSessionPermissionMode(s.ctx, id, pi.ModeAllowAll)
	require.NoError(s.t, err)
	return id
}

// TestPiTwoInputsOneSentWhileWorking sends a second input while Pi streams the first
// response: Pi delivers it as a steering message of the running run, so one response
// answers both. The model Pi's replies name becomes the Session's model_name.
func TestPiTwoInputsOneSentWhileWorking(t *testing.T) {
	s, model := newPiStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.piSession()

	first := s.send(id, devmodel.Directive("slow", "chunks", "10", "delay", "200ms"))
	s.eventually("the first response to stream", func() bool { return strings.Contains(s.text(id), "Slow chunk") })
	second := s.send(id, "hello again")
	s.eventually("both inputs answered and the program idle", func() bool {
		return s.admittedAndIdle(id, first) && s.admittedAndIdle(id, second) && s.answerEnded(id, second)
	})
	responses, err := s.st.ListResponsesBySession(s.ctx, id)
	require.NoError(t, err)
	require.Len(t, responses, 1, "the second input joined the running run")
	var ids []string
	require.NoError(t, json.Unmarshal(responses[0].InputIDs, &ids))
	require.Equal(t, []string{first, second}, ids)
	require.Equal(t, store.OutcomeCompleted, *responses[0].Outcome)
	require.Equal(t, "stop", *responses[0].NativeReason)
	s.requireGaplessLog(id)
	s.eventually("model_name recorded", func() bool { return s.session(id).ModelName != nil })
	require.Contains(t, requestedModels(model), *s.session(id).ModelName, "the model Pi's replies name")
}

// TestPiRemovedBoxFailsTheResponseAndResumesTheConversation removes the box while Pi
// streams: the open response ends failed (runtime_lost), and the next message resumes
// the same conversation from its mirrored and restored session file in a new box.
func TestPiRemovedBoxFailsTheResponseAndResumesTheConversation(t *testing.T) {
	s, model := newPiStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.piSession()

	hello := s.send(id, "hello from the first box")
	s.eventually("the first run", func() bool { return s.admittedAndIdle(id, hello) })
	s.send(id, devmodel.Directive("slow", "chunks", "200", "delay", "200ms"))
	s.eventually("streaming", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.OpenResponses > 0 && strings.Contains(s.text(id), "Slow chunk")
	})
	before := s.session(id)
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))
	s.eventually("the lost response to fail", func() bool {
		r, err := s.st.GetLastEndedResponse(s.ctx, id)
		return err == nil && *r.Outcome == store.OutcomeFailed && *r.NativeReason == store.NativeReasonRuntimeLost
	})

	again := s.send(id, "are you still there?")
	s.eventually("the next message answered in a new box", func() bool { return s.admittedAndIdle(id, again) && s.answerEnded(id, again) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same Pi conversation")
	reqs := model.Requests()
	require.True(t, bytes.Contains(reqs[len(reqs)-1].Body, []byte("hello from the first box")), "the model saw the earlier runs")
	s.requireGaplessLog(id)
}

// TestPiWorkerKilledWhileStreamingContinuesFromTheRecordedCursor stops the worker
// holding Pi's connection mid-response; another worker reconnects to the same box and
// Pi and continues from the recorded cursor.
func TestPiWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	s, _ := newPiStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.piSession()

	const chunks = 30
	in := s.send(id, devmodel.Directive("slow", "chunks", strconv.Itoa(chunks), "delay", "200ms"))
	s.eventually("streaming to be under way", func() bool { return strings.Count(s.text(id), "Slow chunk") >= 3 })
	stopA()
	require.Less(t, strings.Count(s.text(id), "Slow chunk"), chunks, "the response was still streaming")
	s.startWorker("host-b-" + uniq())

	s.eventually("the response to finish", func() bool { return s.admittedAndIdle(id, in) && s.answerEnded(id, in) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	s.requireSlowChunksOnce(id, chunks)
	s.requireGaplessLog(id)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the same box: a lost connection is not a lost box")
}

// TestPiKilledHoldingAQueuedMessageAnswersItOnceAfterRecovery kills Pi while it holds
// a steering message in memory only: the message was never admitted, so the platform
// keeps custody and hands it to the Pi that resumes the session file, which answers it
// exactly once.
func TestPiKilledHoldingAQueuedMessageAnswersItOnceAfterRecovery(t *testing.T) {
	s, model := newPiStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.piSession()

	hello := s.send(id, "hello before the kill")
	s.eventually("the first run", func() bool { return s.admittedAndIdle(id, hello) })
	s.send(id, devmodel.Directive("slow", "chunks", "200", "delay", "200ms"))
	s.eventually("streaming", func() bool { return strings.Contains(s.text(id), "Slow chunk 2 of") })
	const queuedText = "queued while Pi streams"
	queued := s.send(id, queuedText)

	sess := s.session(id)
	h, err := s.backend.Get(s.ctx, *sess.SandboxID)
	require.NoError(t, err)
	box := enginebox.New(h)
	var material struct {
		Process string `json:"process"`
	}
	require.NoError(t, json.Unmarshal(sess.ResumeMaterial, &material))
	proc, err := box.StartProcess(s.ctx, engines.ProcessSpec{Name: material.Process, Command: []string{"/bin/false"}})
	require.NoError(t, err)
	// Pi has the message in its queue (its prompt accepted) and nothing of it on disk.
	s.eventually("Pi queues the message", func() bool {
		for l, err := range proc.ReadOutput(s.ctx, 0, false) {
			if err == nil && strings.Contains(string(l.Data), `"id":"input:`+queued+`","type":"response"`) {
				return true
			}
		}
		return false
	})
	in, err := s.st.GetInputByID(s.ctx, queued)
	require.NoError(t, err)
	require.Nil(t, in.AdmittedAt, "a queued message is not admitted")
	require.NoError(t, proc.Signal(s.ctx, "KILL"))

	s.eventually("the queued message answered after recovery", func() bool { return s.admittedAndIdle(id, queued) && s.answerEnded(id, queued) })
	var asked int
	for _, r := range model.Requests() {
		if bytes.Contains(lastUserText(r.Body), []byte(queuedText)) {
			asked++
		}
	}
	require.Equal(t, 1, asked, "the model was asked about the queued message once")
	file := pi.NewAdapter(pi.Config{}).PathsFor(engines.EngineStartupContext{}).SessionFile(*s.session(id).EngineSessionKey)
	h, err = s.backend.Get(s.ctx, *s.session(id).SandboxID)
	require.NoError(t, err)
	data, err := enginebox.New(h).ReadFile(s.ctx, nil, file)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), `"text":"`+queuedText+`"`), "the session holds it once")
	require.Equal(t, *sess.EngineSessionKey, *s.session(id).EngineSessionKey, "the same Pi conversation")
	s.requireGaplessLog(id)
}

// lastUserText is the text of the last user message of an Anthropic Messages request.
func lastUserText(body []byte) []byte {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return nil
}
