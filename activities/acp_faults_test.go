package activities_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/store"
)

// TestACPWorkerKilledWhileStreamingContinuesFromTheRecordedCursor stops the worker
// holding each ACP program's connection mid-response; another worker reconnects to
// the same box and program and continues from the recorded cursor: every chunk once,
// in order, in the same box. DeepSeek Harness sends its text only once committed, so
// its worker is stopped while the model streams.
func TestACPWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	for _, tc := range shippedACPPrograms {
		t.Run(tc.kind, func(t *testing.T) {
			s, model, _ := newACPStack(t, tc.profile, tc.api)
			stopA := s.startWorker("host-a-" + uniq())
			id := s.newSession()

			// Six seconds of reply: the worker is stopped once three chunks are recorded,
			// and on two busy cores a Relay can trail its program by seconds.
			const chunks = 60
			in := s.send(id, devmodel.Directive("slow", "chunks", strconv.Itoa(chunks), "delay", "100ms"))
			if tc.kind == acp.KindDeepSeekHarness {
				_, err := model.WaitFor(s.ctx, func(r devmodel.Request) bool { return bytes.Contains(r.Body, []byte("script:slow")) })
				require.NoError(t, err)
			} else {
				s.eventually("streaming to be under way", func() bool { return strings.Count(s.text(id), "Slow chunk") >= 3 })
			}
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
		})
	}
}

// TestDeepSeekHarnessBoxKilledHoldingABusyMessageAnswersItOnce kills the box while the
// client holds a message sent during a running prompt (DeepSeek Harness's bridge would
// refuse it): the message was never written to the program, so it is not admitted and
// stays in the platform's custody; the runtime on a new box reopens the session and
// answers it exactly once, while the admitted prompt that was running is not asked again.
func TestDeepSeekHarnessBoxKilledHoldingABusyMessageAnswersItOnce(t *testing.T) {
	s, model, _ := newACPStack(t, deepSeekHarness, apiOpenAI)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	hello := s.send(id, "remember the word KUMQUAT")
	s.eventually("the first answer", func() bool { return s.admittedAndIdle(id, hello) && s.answerEnded(id, hello) })
	running := s.send(id, devmodel.Directive("slow", "chunks", "200", "delay", "100ms"))
	_, err := model.WaitFor(s.ctx, func(r devmodel.Request) bool { return bytes.Contains(r.Body, []byte("script:slow")) })
	require.NoError(t, err)
	s.waitAdmitted(running)
	const heldText = "held while DeepSeek Harness is busy"
	held := s.send(id, heldText)
	s.eventually("the message to reach the runtime", func() bool {
		in, err := s.st.GetInputByID(s.ctx, held)
		require.NoError(t, err)
		return in.DeliveredAt != nil
	})
	in, err := s.st.GetInputByID(s.ctx, held)
	require.NoError(t, err)
	require.Nil(t, in.AdmittedAt, "a held message is not admitted")

	before := s.session(id)
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))
	s.eventually("the held message answered in a new box", func() bool { return s.admittedAndIdle(id, held) && s.answerEnded(id, held) })
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same DSH session")
	var asked, askedRunning int
	for _, r := range model.Requests() {
		if bytes.Contains(r.Body, []byte(heldText)) {
			asked++
			require.Contains(t, string(r.Body), "KUMQUAT", "the model saw the earlier turns")
		}
		if bytes.Contains(r.Body, []byte("script:slow")) && !bytes.Contains(r.Body, []byte(heldText)) {
			askedRunning++
		}
	}
	require.Equal(t, 1, asked, "the held message was answered once")
	require.Equal(t, 1, askedRunning, "the admitted prompt was not asked again on its own")
	s.requireGaplessLog(id)
}
