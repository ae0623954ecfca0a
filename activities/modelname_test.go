package activities_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// requestedModels are the models the program asked the model service for.
func requestedModels(model *devmodel.Server) []string {
	var out []string
	for _, r := range model.Requests() {
		if r.Model != "" && !slices.Contains(out, r.Model) {
			out = append(out, r.Model)
		}
	}
	return out
}

// TestClaudeCodeReportsItsModelOnTheSession: the model Claude Code's init message names
// is recorded as the Session's model_name, and it is the model the program then asked
// the model service for.
func TestClaudeCodeReportsItsModelOnTheSession(t *testing.T) {
	s, model := newClaudeStackWithModel(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "hello")
	s.eventually("the input answered", func() bool { return s.admittedAndIdle(id, in) && s.answerEnded(id, in) })
	s.eventually("model_name recorded", func() bool { return s.session(id).ModelName != nil })
	require.Contains(t, requestedModels(model), *s.session(id).ModelName)
}

// TestCodexReportsItsModelOnTheSession: the model Codex reports for its thread is
// recorded at activation as the Session's model_name.
func TestCodexReportsItsModelOnTheSession(t *testing.T) {
	s, model := newCodexStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	first := s.send(id, "hello")
	s.eventually("the input answered", func() bool { return s.admittedAndIdle(id, first) && s.answerEnded(id, first) })
	got := s.session(id).ModelName
	require.NotNil(t, got, "recorded at activation")
	require.Contains(t, requestedModels(model), *got)
}
