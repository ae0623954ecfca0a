package store

import (
	"encoding/json"
	"time"

	"github.com/astrabox/astrabox/internal/sessionstate"
)

// The row types mirror the tables in migrations/ column for column. They carry no
// association fields: every join or related read is an explicit, named method.

// Closed vocabularies, as the schema's CHECK constraints spell them.
const (
	RoleMember = "member"
	RoleAdmin  = "admin"

	InputPending   = "pending"
	InputDelivered = "delivered"
	InputAdmitted  = "admitted"
	InputFailed    = "failed"

	// The lifecycle markers and runtime statuses are internal/sessionstate's, which
	// derives a Session's state from them.
	LifecycleCreating   = sessionstate.LifecycleCreating
	LifecycleActive     = sessionstate.LifecycleActive
	LifecycleTerminated = sessionstate.LifecycleTerminated
	LifecycleDeleted    = sessionstate.LifecycleDeleted

	SandboxLocal       = "local"
	SandboxOpenSandbox = "opensandbox"
	SandboxKubernetes  = "kubernetes"

	TenancyConversation = "conversation"
	TenancyShared       = "shared"

	OriginInput  = "input"
	OriginEngine = "engine"

	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"

	InteractionOpen      = "open"
	InteractionAnswered  = "answered"
	InteractionWithdrawn = "withdrawn"
	InteractionExpired   = "expired"

	RuntimeIdle    = sessionstate.RuntimeIdle
	RuntimeWorking = sessionstate.RuntimeWorking
	RuntimeWaiting = sessionstate.RuntimeWaiting

	// NativeReasonRuntimeLost ends a response the runtime no longer reports after it
	// was confirmed lost (reconciliation, never a guess).
	NativeReasonRuntimeLost = "runtime_lost"
)

// User is a person who uses AstraBox.
type User struct {
	ID          string    `gorm:"column:id;primaryKey"`
	Email       string    `gorm:"column:email"`
	DisplayName string    `gorm:"column:display_name"`
	Role        string    `gorm:"column:role"`
	CreatedAt   time.Time `gorm:"column:created_at"`
	UpdatedAt   time.Time `gorm:"column:updated_at"`
	// DisabledAt is set while the user may not authenticate.
	DisabledAt *time.Time `gorm:"column:disabled_at"`
}

// TableName is the users table.
func (User) TableName() string { return "users" }

// IsAdmin reports whether the user holds the admin role.
func (u User) IsAdmin() bool { return u.Role == RoleAdmin }

// Disabled reports whether the user is disabled.
func (u User) Disabled() bool { return u.DisabledAt != nil }

// APIToken is a user's bearer token, stored as the SHA-256 of its plaintext.
type APIToken struct {
	ID         string     `gorm:"column:id;primaryKey"`
	UserID     string     `gorm:"column:user_id"`
	Name       string     `gorm:"column:name"`
	Prefix     string     `gorm:"column:prefix"`
	TokenHash  []byte     `gorm:"column:token_hash"`
	CreatedAt  time.Time  `gorm:"column:created_at"`
	LastUsedAt *time.Time `gorm:"column:last_used_at"`
	ExpiresAt  *time.Time `gorm:"column:expires_at"`
	RevokedAt  *time.Time `gorm:"column:revoked_at"`
}

// TableName is the api_tokens table.
func (APIToken) TableName() string { return "api_tokens" }

// RuntimeProfile is the sandbox configuration an Agent runs in.
type RuntimeProfile struct {
	ID             string          `gorm:"column:id;primaryKey"`
	Name           string          `gorm:"column:name"`
	EngineKind     string          `gorm:"column:engine_kind"`
	Image          string          `gorm:"column:image"`
	Enabled        bool            `gorm:"column:enabled"`
	SandboxBackend string          `gorm:"column:sandbox_backend"`
	SandboxTenancy string          `gorm:"column:sandbox_tenancy"`
	Resources      json.RawMessage `gorm:"column:resources"`
	NetworkPolicy  json.RawMessage `gorm:"column:network_policy"`
	Tracing        json.RawMessage `gorm:"column:tracing"`
	PrewarmSize    int             `gorm:"column:prewarm_size"`
	// ACPProgram is the Agent program a profile of the generic ACP kind defines
	// (engines/acp.Program as JSON); nil on every other profile.
	ACPProgram json.RawMessage `gorm:"column:acp_program"`
	CreatedAt  time.Time       `gorm:"column:created_at"`
	UpdatedAt  time.Time       `gorm:"column:updated_at"`
}

// TableName is the runtime_profiles table.
func (RuntimeProfile) TableName() string { return "runtime_profiles" }

// Agent is a configured Agent program a Session starts from.
type Agent struct {
	ID               string          `gorm:"column:id;primaryKey"`
	Name             string          `gorm:"column:name"`
	Description      string          `gorm:"column:description"`
	EngineKind       string          `gorm:"column:engine_kind"`
	RuntimeProfileID string          `gorm:"column:runtime_profile_id"`
	Config           json.RawMessage `gorm:"column:config"`
	// SealedSecrets holds the config's secret values, sealed (GetAgentSecrets opens
	// them); Config holds a redaction marker in their place.
	SealedSecrets  []byte    `gorm:"column:secrets"`
	PermissionMode *string   `gorm:"column:permission_mode"`
	CreatedBy      *string   `gorm:"column:created_by"`
	Version        int64     `gorm:"column:version"`
	CreatedAt      time.Time `gorm:"column:created_at"`
	UpdatedAt      time.Time `gorm:"column:updated_at"`
}

// TableName is the agents table.
func (Agent) TableName() string { return "agents" }

// Session is one conversation with an Agent.
type Session struct {
	ID                 string          `gorm:"column:id;primaryKey"`
	AgentID            string          `gorm:"column:agent_id"`
	UserID             string          `gorm:"column:user_id"`
	Kind               string          `gorm:"column:kind"`
	Title              *string         `gorm:"column:title"`
	TitleSource        *string         `gorm:"column:title_source"`
	PermissionMode     *string         `gorm:"column:permission_mode"`
	Lifecycle          string          `gorm:"column:lifecycle"`
	RuntimeStatus      *string         `gorm:"column:runtime_status"`
	RuntimeUnavailable bool            `gorm:"column:runtime_unavailable"`
	ArchivedAt         *time.Time      `gorm:"column:archived_at"`
	DeletedAt          *time.Time      `gorm:"column:deleted_at"`
	EngineSessionKey   *string         `gorm:"column:engine_session_key"`
	SandboxID          *string         `gorm:"column:sandbox_id"`
	HostTaskQueue      *string         `gorm:"column:host_task_queue"`
	RuntimeGeneration  int64           `gorm:"column:runtime_generation"`
	RuntimeInfo        json.RawMessage `gorm:"column:runtime_info"`
	// RuntimeError says why the platform could not start the Agent program; nil once
	// a runtime starts.
	RuntimeError *string `gorm:"column:runtime_error"`
	// ModelCredentialOwner is the model credential delivery owner the current runtime
	// was placed with (nil: none was declared).
	ModelCredentialOwner *string `gorm:"column:model_credential_owner"`
	ModelName            *string `gorm:"column:model_name"`
	ResumeMaterial       []byte  `gorm:"column:resume_material"`
	// OutputSeq and LastOutputAt are the Session's output position (session_outputs,
	// its Relay's row): read with the Session, never written through it.
	OutputSeq      int64      `gorm:"column:output_seq;->"`
	InputSeq       int64      `gorm:"column:input_seq"`
	LastOutputAt   *time.Time `gorm:"column:last_output_at;->"`
	ReadAt         *time.Time `gorm:"column:read_at"`
	LastActivityAt time.Time  `gorm:"column:last_activity_at"`
	CreatedAt      time.Time  `gorm:"column:created_at"`
	UpdatedAt      time.Time  `gorm:"column:updated_at"`
}

// TableName is the sessions table.
func (Session) TableName() string { return "sessions" }

// Input is a person's message in the platform's custody.
type Input struct {
	ID              string     `gorm:"column:id;primaryKey"`
	SessionID       string     `gorm:"column:session_id"`
	Seq             int64      `gorm:"column:seq"`
	ClientMessageID *string    `gorm:"column:client_message_id"`
	Content         string     `gorm:"column:content"`
	State           string     `gorm:"column:state"`
	FailureCode     *string    `gorm:"column:failure_code"`
	FailureMessage  *string    `gorm:"column:failure_message"`
	AcceptedAt      time.Time  `gorm:"column:accepted_at"`
	DeliveredAt     *time.Time `gorm:"column:delivered_at"`
	AdmittedAt      *time.Time `gorm:"column:admitted_at"`
	FailedAt        *time.Time `gorm:"column:failed_at"`
	// DeliveredRuntimeGeneration is the runtime generation that received the input.
	DeliveredRuntimeGeneration *int64 `gorm:"column:delivered_runtime_generation"`
}

// TableName is the inputs table.
func (Input) TableName() string { return "inputs" }

// OutputPart is one browser part of a Session's output log.
type OutputPart struct {
	SessionID  string          `gorm:"column:session_id;primaryKey"`
	Seq        int64           `gorm:"column:seq;primaryKey"`
	ResponseID *string         `gorm:"column:response_id"`
	Frame      json.RawMessage `gorm:"column:frame"`
	CreatedAt  time.Time       `gorm:"column:created_at"`
}

// TableName is the output_parts table.
func (OutputPart) TableName() string { return "output_parts" }

// ReaderLease is the one-reader lease of a Session.
type ReaderLease struct {
	SessionID  string    `gorm:"column:session_id;primaryKey"`
	Holder     string    `gorm:"column:holder"`
	Generation int64     `gorm:"column:generation"`
	AcquiredAt time.Time `gorm:"column:acquired_at"`
	ExpiresAt  time.Time `gorm:"column:expires_at"`
}

// TableName is the reader_leases table.
func (ReaderLease) TableName() string { return "reader_leases" }

// RuntimeCursor is the saved resume position of a Session's runtime events.
type RuntimeCursor struct {
	SessionID       string          `gorm:"column:session_id;primaryKey"`
	Generation      string          `gorm:"column:generation"`
	Position        json.RawMessage `gorm:"column:position"`
	ThroughSeq      int64           `gorm:"column:through_seq"`
	LeaseGeneration int64           `gorm:"column:lease_generation"`
	UpdatedAt       time.Time       `gorm:"column:updated_at"`
}

// TableName is the runtime_cursors table.
func (RuntimeCursor) TableName() string { return "runtime_cursors" }

// Response is one response as the runtime reported it; open while Outcome is nil.
type Response struct {
	SessionID    string          `gorm:"column:session_id;primaryKey"`
	ResponseID   string          `gorm:"column:response_id;primaryKey"`
	Origin       string          `gorm:"column:origin"`
	InputIDs     json.RawMessage `gorm:"column:input_ids"`
	Outcome      *string         `gorm:"column:outcome"`
	NativeReason *string         `gorm:"column:native_reason"`
	Usage        json.RawMessage `gorm:"column:usage"`
	Error        json.RawMessage `gorm:"column:error"`
	StartedSeq   int64           `gorm:"column:started_seq"`
	EndedSeq     *int64          `gorm:"column:ended_seq"`
	StartedAt    time.Time       `gorm:"column:started_at"`
	EndedAt      *time.Time      `gorm:"column:ended_at"`
}

// TableName is the responses table.
func (Response) TableName() string { return "responses" }

// Interaction is an approval or question a response waits on.
type Interaction struct {
	SessionID     string          `gorm:"column:session_id;primaryKey"`
	InteractionID string          `gorm:"column:interaction_id;primaryKey"`
	ResponseID    *string         `gorm:"column:response_id"`
	Contract      json.RawMessage `gorm:"column:contract"`
	State         string          `gorm:"column:state"`
	Answer        json.RawMessage `gorm:"column:answer"`
	AnsweredBy    *string         `gorm:"column:answered_by"`
	AnswerSavedAt *time.Time      `gorm:"column:answer_saved_at"`
	ClosureReason *string         `gorm:"column:closure_reason"`
	OpenedAt      time.Time       `gorm:"column:opened_at"`
	ClosedAt      *time.Time      `gorm:"column:closed_at"`
}

// TableName is the interactions table.
func (Interaction) TableName() string { return "interactions" }

// ChildRun is a sub-agent run an Agent program reported.
type ChildRun struct {
	// ID is the public id (engines.ChildRunID), the identity AstraBox keeps.
	ID        string `gorm:"column:id;primaryKey"`
	SessionID string `gorm:"column:session_id"`
	// NativeRef is the private native reference, nil when the child was reported by
	// its public id only (the Relay never sees native references).
	NativeRef  *string `gorm:"column:native_ref"`
	ParentID   *string `gorm:"column:parent_id"`
	ResponseID *string `gorm:"column:response_id"`
	// Name is the child's title as the program reported it.
	Name string `gorm:"column:name"`
	// AgentType is the program's name for the kind of child agent, if any.
	AgentType string `gorm:"column:agent_type"`
	// ParentToolCallID is the tool call that started the child, if known.
	ParentToolCallID *string         `gorm:"column:parent_tool_call_id"`
	Status           string          `gorm:"column:status"`
	Usage            json.RawMessage `gorm:"column:usage"`
	ControlRef       *string         `gorm:"column:control_ref"`
	CreatedAt        time.Time       `gorm:"column:created_at"`
	UpdatedAt        time.Time       `gorm:"column:updated_at"`
}

// TableName is the child_runs table.
func (ChildRun) TableName() string { return "child_runs" }

// SessionLogEntry is one entry of an engine's native JSONL conversation log.
type SessionLogEntry struct {
	SessionID string          `gorm:"column:session_id;primaryKey"`
	Stream    string          `gorm:"column:stream;primaryKey"`
	EntrySeq  int64           `gorm:"column:entry_seq;primaryKey"`
	Entry     json.RawMessage `gorm:"column:entry"`
	CreatedAt time.Time       `gorm:"column:created_at"`
}

// TableName is the session_log_entries table.
func (SessionLogEntry) TableName() string { return "session_log_entries" }

// RuntimeStateBlob is opaque native runtime state kept outside the sandbox.
type RuntimeStateBlob struct {
	Scope      string    `gorm:"column:scope;primaryKey"`
	OwnerID    string    `gorm:"column:owner_id;primaryKey"`
	Name       string    `gorm:"column:name;primaryKey"`
	Generation int64     `gorm:"column:generation"`
	Data       []byte    `gorm:"column:data"`
	SHA256     []byte    `gorm:"column:sha256"`
	CreatedAt  time.Time `gorm:"column:created_at"`
	UpdatedAt  time.Time `gorm:"column:updated_at"`
}

// TableName is the runtime_state_blobs table.
func (RuntimeStateBlob) TableName() string { return "runtime_state_blobs" }
