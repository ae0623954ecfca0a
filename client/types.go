package client

import (
	"encoding/json"
	"time"
)

// Session is a Session as GET /sessions/{id} shows it; list entries fill the summary
// fields only.
type Session struct {
	SessionID          string       `json:"session_id"`
	AgentID            string       `json:"agent_id"`
	State              string       `json:"state"`
	Title              *string      `json:"title"`
	ModelName          *string      `json:"model_name"`
	PermissionMode     *string      `json:"permission_mode"`
	RuntimeStatus      *string      `json:"runtime_status"`
	RuntimeUnavailable bool         `json:"runtime_unavailable"`
	RuntimeError       *string      `json:"runtime_error"`
	Archived           bool         `json:"archived"`
	OutputSeq          int64        `json:"output_seq"`
	LastOutputAt       *time.Time   `json:"last_output_at"`
	ReadAt             *time.Time   `json:"read_at"`
	Unread             bool         `json:"unread"`
	CurrentResponses   []Response   `json:"current_responses"`
	LastResponse       *Response    `json:"last_response"`
	PendingInteraction *Interaction `json:"pending_interaction"`
	HeldInputs         []HeldInput  `json:"held_inputs"`
	CreatedAt          *time.Time   `json:"created_at"`
	UpdatedAt          *time.Time   `json:"updated_at"`
}

// Response is a response of the Agent program, open (Outcome nil) or ended.
type Response struct {
	ResponseID   string          `json:"response_id"`
	Origin       string          `json:"origin"`
	InputIDs     []string        `json:"input_ids"`
	Outcome      *string         `json:"outcome"`
	NativeReason *string         `json:"native_reason"`
	Usage        json.RawMessage `json:"usage"`
	StartedSeq   int64           `json:"started_seq"`
	EndedSeq     *int64          `json:"ended_seq"`
	StartedAt    time.Time       `json:"started_at"`
	EndedAt      *time.Time      `json:"ended_at"`
}

// Interaction is an approval or question a response waits on.
type Interaction struct {
	InteractionID string          `json:"interaction_id"`
	ResponseID    *string         `json:"response_id"`
	State         string          `json:"state"`
	Contract      json.RawMessage `json:"contract"`
	AnswerSaved   bool            `json:"answer_saved"`
	OpenedAt      time.Time       `json:"opened_at"`
}

// HeldInput is a message accepted but not yet taken by the Agent program.
type HeldInput struct {
	InputID         string    `json:"input_id"`
	ClientMessageID *string   `json:"client_message_id"`
	State           string    `json:"state"`
	AcceptedAt      time.Time `json:"accepted_at"`
}

// CreatedSession answers a Session's creation.
type CreatedSession struct {
	SessionID      string `json:"session_id"`
	AgentID        string `json:"agent_id"`
	DeploymentName string `json:"deployment_name"`
}

// SessionPage is one page of the conversation list.
type SessionPage struct {
	Sessions   []Session `json:"sessions"`
	HasMore    bool      `json:"has_more"`
	NextCursor *string   `json:"next_cursor"`
}

// Input is a message to send. ClientMessageID makes sending idempotent.
type Input struct {
	Content         string  `json:"content"`
	ClientMessageID *string `json:"client_message_id,omitempty"`
}

// InputFailure is why a message was refused.
type InputFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Receipt answers a sent message at once; the response arrives on the stream.
type Receipt struct {
	SessionID       string        `json:"session_id"`
	InputID         string        `json:"input_id"`
	ClientMessageID *string       `json:"client_message_id"`
	AcceptedAt      time.Time     `json:"accepted_at"`
	State           string        `json:"state"`
	Duplicate       bool          `json:"duplicate"`
	Failure         *InputFailure `json:"failure"`
	OutputSeq       int64         `json:"output_seq"`
}

// InterruptResult answers an interrupt: accepted (passed to the program) or idle.
type InterruptResult struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	RequestID string `json:"request_id,omitempty"`
}

// Answer answers an approval or a question; its shape follows the interaction's
// presentation.
type Answer struct {
	Decision string          `json:"decision,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Values   json.RawMessage `json:"values,omitempty"`
}

// UIMessage is a recorded message as an AI SDK UI message.
type UIMessage struct {
	ID       string            `json:"id"`
	Role     string            `json:"role"`
	Metadata json.RawMessage   `json:"metadata"`
	Parts    []json.RawMessage `json:"parts"`
}

// MessagePage is a page of the recorded conversation, newest page first.
type MessagePage struct {
	Messages  []UIMessage `json:"messages"`
	HasMore   bool        `json:"has_more"`
	Before    *string     `json:"before"`
	OutputSeq *int64      `json:"output_seq"`
	ReplaySeq *int64      `json:"replay_seq"`
}

// User is a person with access to the deployment.
type User struct {
	UserID      string     `json:"user_id"`
	Email       string     `json:"email"`
	DisplayName string     `json:"display_name"`
	Role        string     `json:"role"`
	Disabled    bool       `json:"disabled"`
	DisabledAt  *time.Time `json:"disabled_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// NewUser is what CreateUser sends; Role is member (default) or admin.
type NewUser struct {
	Email       string `json:"email"`
	DisplayName string `json:"display_name,omitempty"`
	Role        string `json:"role,omitempty"`
}

// Token is an API token without its secret.
type Token struct {
	TokenID    string     `json:"token_id"`
	UserID     string     `json:"user_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// IssuedToken is a token just issued, with its secret: the only time it is shown.
type IssuedToken struct {
	Token
	Secret string `json:"secret"`
}

// Me is the caller and the token the request used.
type Me struct {
	User  User  `json:"user"`
	Token Token `json:"token"`
}

// Share is a read-only share link without its token.
type Share struct {
	ShareID       string     `json:"share_id"`
	SessionID     string     `json:"session_id"`
	AllowDownload bool       `json:"allow_download"`
	State         string     `json:"state"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at"`
}

// CreatedShare is a link just created, with its token and path: the only time they
// are shown.
type CreatedShare struct {
	Share
	Token string `json:"token"`
	Path  string `json:"path"`
}

// SharedSession is what a share link's viewer reads of the Session.
type SharedSession struct {
	Session Session `json:"session"`
	Share   struct {
		AllowDownload bool      `json:"allow_download"`
		ExpiresAt     time.Time `json:"expires_at"`
	} `json:"share"`
}
