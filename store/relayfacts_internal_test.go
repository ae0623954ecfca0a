package store

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A group's batches of a turn's facts (the log's entries, admissions, a reply's start
// and end) cost one statement a kind, however many batches the group has; a batch
// with another fact, or with two facts of a kind one statement cannot hold in its
// order, has its facts written one by one.
func TestAGroupsFactsGoOneStatementAKind(t *testing.T) {
	resp := "r1"
	p := RelayOp{Part: &NewPart{ResponseID: &resp, Frame: json.RawMessage(`{"type":"finish"}`)}}
	start := func(id string) RelayOp {
		return RelayOp{StartResponse: &ResponseStart{ResponseID: id, Origin: "input"}}
	}
	end := func(id string) RelayOp {
		return RelayOp{EndResponse: &ResponseEnd{ResponseID: id, Outcome: OutcomeCompleted}}
	}
	logOf := func(stream string) RelayOp { return RelayOp{SessionLog: &SessionLogAppend{Stream: stream}} }
	turn := []RelayOp{logOf("main"), {AdmitInput: "in-1"}, start("r1"), p, end("r1"), end("r0"), start("r2"), logOf("other")}
	require.True(t, groupable(turn))
	for name, ops := range map[string][]RelayOp{
		"an interaction":                {start("r1"), {OpenInteraction: &InteractionOpening{InteractionID: "i1"}}},
		"a status without parts' fold":  {{Status: "idle"}},
		"a child run":                   {{ChildRun: &ChildRunReport{}}},
		"a diagnostic":                  {{Diagnostic: &DiagnosticRecord{}}},
		"two starts of one reply":       {start("r1"), start("r1")},
		"a start after its reply's end": {end("r1"), start("r1")},
		"two ends of one reply":         {end("r1"), end("r1")},
		"two mirrors of one log":        {logOf("main"), logOf("main")},
	} {
		require.False(t, groupable(ops), name)
	}

	var g groupedFacts
	for _, session := range []string{"s1", "s2", "s3"} {
		parts := g.add(&relayCommit{}, RelayBatch{SessionID: session, Ops: turn})
		require.Len(t, parts, 1)
	}
	require.Equal(t, []int64{1, 2}, []int64{g.starts[0].Next, g.starts[1].Next}, "a start is its next part, an end its last one")
	require.Equal(t, []int64{1, 1}, []int64{g.ends[0].Next, g.ends[1].Next})
	facts := &pgx.Batch{}
	require.NoError(t, g.queue(facts))
	require.Equal(t, 4, facts.Len(), "the log's entries, the admissions, the starts and the ends of three batches")
}

// TestALoneMirrorIsItsOneStatement: only a group of one batch holding one log's
// entries and nothing else is written as the mirror's one statement; a log's entries
// with anything else, or meeting another batch, go through the group's transaction.
func TestALoneMirrorIsItsOneStatement(t *testing.T) {
	log := RelayOp{SessionLog: &SessionLogAppend{Stream: "main", Entries: []json.RawMessage{json.RawMessage(`{}`)}}}
	alone := &relayCommit{batch: RelayBatch{SessionID: "s1", Ops: []RelayOp{log}}}
	got, ok := sessionLogAlone([]*relayCommit{alone})
	require.True(t, ok)
	require.Same(t, log.SessionLog, got)

	for name, group := range map[string][]*relayCommit{
		"with an admission": {{batch: RelayBatch{Ops: []RelayOp{log, {AdmitInput: "in-1"}}}}},
		"with a cursor":     {{batch: RelayBatch{Ops: []RelayOp{log}, Cursor: &CursorUpdate{}}}},
		"meeting another":   {alone, {batch: RelayBatch{SessionID: "s2", Ops: []RelayOp{log}}}},
		"an admission":      {{batch: RelayBatch{Ops: []RelayOp{{AdmitInput: "in-1"}}}}},
	} {
		_, ok := sessionLogAlone(group)
		require.False(t, ok, name)
	}
}
