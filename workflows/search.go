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
