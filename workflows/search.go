package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// Custom search attributes of Session workflows (Keyword), so operators can find a
// Session's workflow in the Temporal UI. The dev stack registers them on its dev
// server; a cluster registers them with `astrabox temporal setup`.
var (
	SearchSessionID    = temporal.NewSearchAttributeKeyKeyword("AstraboxSessionId")
	SearchAgentID      = temporal.NewSearchAttributeKeyKeyword("AstraboxAgentId")
	SearchSessionState = temporal.NewSearchAttributeKeyKeyword("AstraboxSessionState")
	SearchEngineKind   = temporal.NewSearchAttributeKeyKeyword("AstraboxEngineKind")
)

// SearchAttributeNames lists the custom search attributes and their kinds, for
// registering them on a Temporal server.
func SearchAttributeNames() map[string]string {
	return map[string]string{
		SearchSessionID.GetName():    "Keyword",
		SearchAgentID.GetName():      "Keyword",
		SearchSessionState.GetName(): "Keyword",
		SearchEngineKind.GetName():   "Keyword",
	}
}

// The Session states the search attribute shows that the workflow names itself; the
// others (READY, PROCESSING, WAITING_INPUT) come from the platform's observations.
const (
	stateCreating   = "CREATING"
	stateReady      = "READY"
	stateTerminated = "TERMINATED"
	stateDeleted    = "DELETED"
)

// sessionState is the Session's state as the API derives it, as far as the workflow
// knows it: its own phase where that decides (a runtime being created, terminated,
// deleted; an archived or released Session settled everything it had open), the
// platform's latest observation otherwise.
func (w *sessionWorkflow) sessionState() string {
	obs := w.s.Observed.State
	switch w.s.Phase {
	case PhaseTerminated:
		return stateTerminated
	case PhaseDeleted:
		return stateDeleted
	case PhaseArchived, PhaseReleased:
		return stateReady
	case PhaseCreating:
		// A reconnect keeps the Session's state as the API shows it; a new or
		// recovered runtime is CREATING.
		if obs == "" || obs == stateTerminated || obs == stateCreating {
			return stateCreating
		}
		return obs
	}
	if obs == "" || obs == stateCreating || obs == stateTerminated {
		return stateReady
	}
	return obs
}

// upsertSearch publishes the Session's identity and state, and its current details.
func (w *sessionWorkflow) upsertSearch(ctx workflow.Context) {
	updates := []temporal.SearchAttributeUpdate{
		SearchSessionID.ValueSet(w.s.SessionID),
		SearchSessionState.ValueSet(w.sessionState()),
	}
	if w.s.AgentID != "" {
		updates = append(updates, SearchAgentID.ValueSet(w.s.AgentID))
	}
	if w.s.EngineKind != "" {
		updates = append(updates, SearchEngineKind.ValueSet(w.s.EngineKind))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
	w.setDetails(ctx)
}

// observed takes the platform's observation of the Session: the search attribute
// changes when the state did, the current details always.
func (w *sessionWorkflow) observed(ctx workflow.Context, o activities.SessionObservation) {
	before := w.sessionState()
	w.s.Observed = o
	if w.draining {
		return // the continuation publishes what it carries when it starts
	}
	if w.sessionState() != before {
		w.upsertSearch(ctx)
		return
	}
	w.setDetails(ctx)
}

// setDetails writes the workflow's current details, which the Temporal UI shows: who
// and what the Session is, then its state, what is open and what is held.
func (w *sessionWorkflow) setDetails(ctx workflow.Context) {
	title := w.s.Observed.Title
	if title == "" {
		title = "(untitled)"
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf(
		"**Agent** %s · **Owner** %s · **Title** %s\n\n**State** %s · runtime %s · open responses %d · open interactions %d · held inputs %d",
		orUnknown(w.s.AgentName), orUnknown(w.s.Owner), title,
		w.sessionState(), strings.ToLower(string(w.s.Phase)), w.s.Observed.OpenResponses, w.s.Observed.OpenInteractions, w.s.Observed.HeldInputs))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// MemoRuntime is the memo key holding the Session's current runtime in one line
// (program version, runner and adapter builds), as its last activation observed it.
const MemoRuntime = "astrabox_runtime"

// runtimeMemoChange versions the memo upsert after activation: histories recorded
// before it have no such command.
const runtimeMemoChange = "runtime-info-memo"

// upsertRuntimeMemo shows the runtime the last activation observed in the workflow's
// memo, where operators see it next to the search attributes.
func (w *sessionWorkflow) upsertRuntimeMemo(ctx workflow.Context, summary string) {
	if workflow.GetVersion(ctx, runtimeMemoChange, workflow.DefaultVersion, 1) < 1 || summary == "" {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]interface{}{MemoRuntime: summary}); err != nil {
		workflow.GetLogger(ctx).Warn("upsert runtime memo", "error", err)
	}
}
