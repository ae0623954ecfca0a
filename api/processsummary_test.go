package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// TestProcessSummaryNamesOperationsNotTheOutcome: the summary of a folded block names
// its operations; status completed means the label is generated, and
// response_completed follows the response's own outcome (false for a failed or
// cancelled response whose label exists). An open response's block is pending.
func TestProcessSummaryNamesOperationsNotTheOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	f.recordResponse(r, "r-ok", nil, toolResponse("r-ok", engines.OutcomeCompleted), "completed")
	f.recordResponse(r, "r-failed", nil, toolResponse("r-failed", engines.OutcomeFailed), "failed")
	f.recordResponse(r, "r-cancelled", nil, toolResponse("r-cancelled", engines.OutcomeCancelled), "cancelled")
	f.recordResponse(r, "r-open", nil, toolResponse("r-open", engines.OutcomeCompleted)[:14], "")

	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 4)
	summary := func(m uiMessage) processSummary {
		t.Helper()
		for _, p := range m.Parts {
			if p["type"] == "data-process-block" {
				b := p["data"].(map[string]any)
				var s processSummary
				f.call("GET", "/api/v1/sessions/"+id+"/history-blocks/"+b["block_id"].(string)+"/process-summary?cursor="+b["cursor"].(string), f.member, nil).ok(t).into(t, &s)
				return s
			}
		}
		t.Fatalf("no block in %s", m.ID)
		return processSummary{}
	}
	ops := []operationCount{{Name: "reasoning", Count: 1}, {Name: "Bash", Count: 1}}

	ok := summary(page.Messages[0])
	assert.Equal(t, summaryCompleted, ok.Status)
	require.NotNil(t, ok.Label)
	assert.Equal(t, "reasoning, Bash", *ok.Label)
	assert.Equal(t, ops, ok.Operations)
	assert.True(t, ok.ResponseCompleted)
	assert.Equal(t, "completed", *ok.Outcome)

	for i, outcome := range []string{"failed", "cancelled"} {
		s := summary(page.Messages[1+i])
		assert.Equal(t, summaryCompleted, s.Status, "the label is generated")
		assert.NotNil(t, s.Label)
		assert.False(t, s.ResponseCompleted, "a %s response did not complete, label or not", outcome)
		assert.Equal(t, outcome, *s.Outcome)
	}

	open := summary(page.Messages[3])
	assert.Equal(t, summaryPending, open.Status)
	assert.Nil(t, open.Label)
	assert.False(t, open.ResponseCompleted)
	assert.Nil(t, open.Outcome)

	base := "/api/v1/sessions/" + id + "/history-blocks/r-ok.work/process-summary"
	f.call("GET", base+"?cursor=bad", f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "cursor")
	f.call("GET", base+"?cursor="+blockCursor("r-ok")+"&x=1", f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest)
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks/r-ok.nope/process-summary?cursor="+blockCursor("r-ok"), f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", base+"?cursor="+blockCursor("r-ok"), f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
}
