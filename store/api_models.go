package store

import (
	"encoding/json"
	"errors"
	"time"
)

// Sentinels of the Sessions API's writes; check them with errors.Is.
var (
	// ErrProgramWorking: the Agent program reports it is working, so the Session cannot be
	// archived or deleted now.
	ErrProgramWorking = errors.New("session busy")
	// ErrInteractionClosed: the interaction was already answered, withdrawn or expired.
	ErrInteractionClosed = errors.New("interaction not open")
	// ErrWrongLifecycle: the Session's lifecycle does not allow the operation (e.g.
	// recovering a Session that is not terminated).
	ErrWrongLifecycle = errors.New("wrong session lifecycle")
)

// interactionStateOpen is the state of an interaction the runtime has not closed.
const interactionStateOpen = "open"

// ResponseRecord is a row of responses: one response as the runtime reported it. An
// open response has a nil Outcome.
type ResponseRecord struct {
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
func (ResponseRecord) TableName() string { return "responses" }

// InteractionRecord is a row of interactions: an approval or question a response
// waits on. A saved answer does not close it; the runtime does.
type InteractionRecord struct {
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
func (InteractionRecord) TableName() string { return "interactions" }

// ChildRunRecord is a row of child_runs: a child run an Agent program delegated to.
type ChildRunRecord struct {
	ID         string          `gorm:"column:id;primaryKey"`
	SessionID  string          `gorm:"column:session_id"`
	NativeRef  string          `gorm:"column:native_ref"`
	ParentID   *string         `gorm:"column:parent_id"`
	ResponseID *string         `gorm:"column:response_id"`
	Name       string          `gorm:"column:name"`
	Status     string          `gorm:"column:status"`
	Usage      json.RawMessage `gorm:"column:usage"`
	ControlRef *string         `gorm:"column:control_ref"`
	CreatedAt  time.Time       `gorm:"column:created_at"`
	UpdatedAt  time.Time       `gorm:"column:updated_at"`
}

// TableName is the child_runs table.
func (ChildRunRecord) TableName() string { return "child_runs" }

// SessionDetails are the rows a Session's derived state and details come from.
type SessionDetails struct {
	OpenResponses    []ResponseRecord
	LastResponse     *ResponseRecord
	OpenInteractions []InteractionRecord
	HeldInputs       []Input
}

// SessionSummary is a Session with the counts its derived state needs, as the
// conversation list reads it.
type SessionSummary struct {
	Session          `gorm:"embedded"`
	OpenResponses    int `gorm:"column:open_responses"`
	OpenInteractions int `gorm:"column:open_interactions"`
	HeldInputs       int `gorm:"column:held_inputs"`
}
