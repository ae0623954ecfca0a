package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/astrabox/astrabox/store"
)

// The handlers' view of the database, one small interface per resource; *store.Store
// implements them all. Tests run them against a real PostgreSQL, since the guarantees
// they rely on (unique constraints, row locks, gapless seqs) live there.

// TokenStore authenticates bearer tokens.
type TokenStore interface {
	GetUserByAPIToken(ctx context.Context, plaintext string, now time.Time) (store.User, store.APIToken, error)
	TouchAPIToken(ctx context.Context, id string, now time.Time, every time.Duration) error
}

// UserStore keeps users and their API tokens, for administrators.
type UserStore interface {
	CreateUser(ctx context.Context, in store.NewUser) (store.User, error)
	GetUserByID(ctx context.Context, id string) (store.User, error)
	ListUsers(ctx context.Context) ([]store.User, error)
	SetUserDisabled(ctx context.Context, id string, disabled bool, now time.Time) (store.User, error)
	CreateAPIToken(ctx context.Context, userID, name string, expiresAt *time.Time) (store.APIToken, string, error)
	ListAPITokensByUser(ctx context.Context, userID string) ([]store.APIToken, error)
	RevokeUserAPIToken(ctx context.Context, userID, tokenID string) (store.APIToken, error)
}

// AgentStore keeps Agents and RuntimeProfiles.
type AgentStore interface {
	CreateAgent(ctx context.Context, in store.NewAgent) (store.Agent, error)
	GetAgentByID(ctx context.Context, id string) (store.Agent, error)
	GetAgentSecrets(ctx context.Context, id string) (store.AgentSecrets, error)
	ListAgents(ctx context.Context) ([]store.Agent, error)
	UpdateAgent(ctx context.Context, id string, expectedVersion int64, upd store.AgentUpdate) (store.Agent, error)
	CreateRuntimeProfile(ctx context.Context, in store.NewRuntimeProfile) (store.RuntimeProfile, error)
	GetRuntimeProfileByID(ctx context.Context, id string) (store.RuntimeProfile, error)
	ListRuntimeProfiles(ctx context.Context, enabledOnly bool) ([]store.RuntimeProfile, error)
	UpdateRuntimeProfile(ctx context.Context, id string, upd store.RuntimeProfileUpdate) (store.RuntimeProfile, error)
	SetRuntimeProfileEnabled(ctx context.Context, id string, enabled bool) error
}

// SessionStore keeps Sessions and the facts their state derives from.
type SessionStore interface {
	CreateSessionIdempotent(ctx context.Context, in store.NewSession) (store.Session, bool, error)
	GetSessionByID(ctx context.Context, id string) (store.Session, error)
	GetSessionDetailsByID(ctx context.Context, sessionID string) (store.SessionDetails, error)
	ListSessionFactsByUser(ctx context.Context, q store.SessionListQuery) ([]store.SessionFacts, error)
	RenameSession(ctx context.Context, sessionID, userID, rawTitle string) (store.Session, error)
	SetSessionPermissionMode(ctx context.Context, sessionID, mode string) (store.Session, error)
	MarkSessionRead(ctx context.Context, sessionID, userID string, at time.Time) (store.Session, error)
	ArchiveSession(ctx context.Context, sessionID string) (store.Session, error)
	DeleteSession(ctx context.Context, sessionID string) (store.Session, error)
	RecoverSession(ctx context.Context, sessionID string) (store.Session, error)
}

// ShareStore keeps Sessions' read-only share links.
type ShareStore interface {
	CreateSessionShare(ctx context.Context, in store.NewSessionShare) (store.SessionShare, string, error)
	ListSessionShares(ctx context.Context, sessionID string) ([]store.SessionShare, error)
	RevokeSessionShare(ctx context.Context, sessionID, shareID string) (store.SessionShare, error)
	GetActiveSessionShare(ctx context.Context, plaintext string, now time.Time) (store.SessionShare, error)
}

// InputStore keeps the messages in the platform's custody.
type InputStore interface {
	AcceptInput(ctx context.Context, in store.NewInput) (store.Accepted, error)
	AcceptGuardedInput(ctx context.Context, in store.NewInput, guard store.InputGuard) (store.Accepted, bool, error)
	GetInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (store.Input, error)
	GetSessionWithHeldInputs(ctx context.Context, id string) (store.Session, int, error)
	ListInputsBySession(ctx context.Context, sessionID string) ([]store.Input, error)
}

// OutputStore reads the output log, responses and child runs.
type OutputStore interface {
	ListOutputPartsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.OutputPart, error)
	StreamPositionAt(ctx context.Context, sessionID string, seq int64) (store.StreamPosition, error)
	GetSessionAtStreamPosition(ctx context.Context, id string, seq int64) (store.Session, store.StreamPosition, error)
	ListResponsesBySession(ctx context.Context, sessionID string) ([]store.Response, error)
	ListResponseParts(ctx context.Context, sessionID string, responseIDs []string) ([]store.OutputPart, error)
	ListChildRunsBySession(ctx context.Context, sessionID string) ([]store.ChildRun, error)
	GetChildRunByID(ctx context.Context, sessionID, childRunID string) (store.ChildRun, error)
	ListChildRunMessageParts(ctx context.Context, sessionID, childRunID string) ([]store.OutputPart, error)
	// InSnapshot runs reads that must agree with one another (a page of messages and
	// the output position it was read at) in one read-only snapshot.
	InSnapshot(ctx context.Context, fn func(tx *store.Store) error) error
}

// InteractionStore keeps answers to approvals and questions.
type InteractionStore interface {
	GetInteractionByID(ctx context.Context, sessionID, interactionID string) (store.Interaction, error)
	SaveInteractionAnswer(ctx context.Context, sessionID, interactionID string, answer json.RawMessage, answeredBy *string) (store.Interaction, error)
}

// ImportStore keeps imported earlier history.
type ImportStore interface {
	ImportHistory(ctx context.Context, sessionID string, msgs []store.ImportedMessage) (int, error)
	ListImportedMessagesBySession(ctx context.Context, sessionID string) ([]store.ImportedMessage, error)
}

// DiagnosticStore reads the runtime diagnostics kept for operators.
type DiagnosticStore interface {
	ListRuntimeDiagnostics(ctx context.Context, sessionID string) ([]store.RuntimeDiagnostic, error)
}

// Store is everything the API reads and writes.
type Store interface {
	TokenStore
	UserStore
	AgentStore
	SessionStore
	ShareStore
	InputStore
	OutputStore
	InteractionStore
	ImportStore
	DiagnosticStore
}

var _ Store = (*store.Store)(nil)
