package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Custom search attributes of Session workflows (Keyword), so operators can find a
// Session's workflow in the Temporal UI. The dev stack registers them on its dev
// server; a cluster registers them once with `temporal operator search-attribute create`.
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

// upsertSearch publishes the Session's identity and phase.
func (w *sessionWorkflow) upsertSearch(ctx workflow.Context) {
	updates := []temporal.SearchAttributeUpdate{
		SearchSessionID.ValueSet(w.s.SessionID),
		SearchSessionState.ValueSet(string(w.s.Phase)),
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
