package api

import (
	"encoding/json"
	"time"

	"github.com/astrabox/astrabox/internal/sessionstate"
	"github.com/astrabox/astrabox/store"
)

// responseView is a response as the Session's details show it.
type responseView struct {
	ResponseID   string          `json:"response_id"`
	Origin       string          `json:"origin"`
	InputIDs     json.RawMessage `json:"input_ids"`
	Outcome      *string         `json:"outcome"`
	NativeReason *string         `json:"native_reason"`
	Usage        json.RawMessage `json:"usage"`
	Error        json.RawMessage `json:"error"`
	StartedSeq   int64           `json:"started_seq"`
	EndedSeq     *int64          `json:"ended_seq"`
	StartedAt    time.Time       `json:"started_at"`
	EndedAt      *time.Time      `json:"ended_at"`
}

func newResponseView(r store.Response) responseView {
	return responseView{
		ResponseID: r.ResponseID, Origin: r.Origin, InputIDs: nullJSON(r.InputIDs, "[]"), Outcome: r.Outcome,
		NativeReason: r.NativeReason, Usage: nullJSON(r.Usage, "null"), Error: nullJSON(r.Error, "null"),
		StartedSeq: r.StartedSeq, EndedSeq: r.EndedSeq, StartedAt: r.StartedAt.UTC(), EndedAt: utc(r.EndedAt),
	}
}

// interactionView is an open approval or question. AnswerSaved is true once someone
// answered it and the runtime has not closed it yet.
type interactionView struct {
	InteractionID string          `json:"interaction_id"`
	ResponseID    *string         `json:"response_id"`
	State         string          `json:"state"`
	Contract      json.RawMessage `json:"contract"`
	AnswerSaved   bool            `json:"answer_saved"`
	OpenedAt      time.Time       `json:"opened_at"`
}

func newInteractionView(r store.Interaction) interactionView {
	return interactionView{InteractionID: r.InteractionID, ResponseID: r.ResponseID, State: r.State,
		Contract: r.Contract, AnswerSaved: r.AnswerSavedAt != nil, OpenedAt: r.OpenedAt.UTC()}
}

// inputFailure is the recorded failure of an input.
type inputFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// heldInputView is an accepted input the program has not taken.
type heldInputView struct {
	InputID         string    `json:"input_id"`
	ClientMessageID *string   `json:"client_message_id"`
	State           string    `json:"state"`
	AcceptedAt      time.Time `json:"accepted_at"`
}

// sessionSummary is a Session as the conversation list shows it.
type sessionSummary struct {
	SessionID          string     `json:"session_id"`
	AgentID            string     `json:"agent_id"`
	State              string     `json:"state"`
	RuntimeStatus      *string    `json:"runtime_status"`
	Title              *string    `json:"title"`
	PermissionMode     *string    `json:"permission_mode"`
	RuntimeUnavailable bool       `json:"runtime_unavailable"`
	Archived           bool       `json:"archived"`
	OutputSeq          int64      `json:"output_seq"`
	LastOutputAt       *time.Time `json:"last_output_at"`
	ReadAt             *time.Time `json:"read_at"`
	Unread             bool       `json:"unread"`
	CreatedAt          *time.Time `json:"created_at"`
	UpdatedAt          *time.Time `json:"updated_at"`
}

// sessionDetails is the complete current Session (GET /sessions/{id}).
type sessionDetails struct {
	sessionSummary
	ModelName *string `json:"model_name"`
	// RuntimeError says why the platform could not start the Agent program (a
	// required command missing from its image, ...); null once a runtime starts.
	RuntimeError *string `json:"runtime_error"`
	// RuntimeInfo is the runtime-info snapshot of the last activation (program
	// version, runner and adapter builds, sandbox, time), for administrators only.
	RuntimeInfo        json.RawMessage  `json:"runtime_info,omitempty"`
	CurrentResponses   []responseView   `json:"current_responses"`
	LastResponse       *responseView    `json:"last_response"`
	PendingInteraction *interactionView `json:"pending_interaction"`
	HeldInputs         []heldInputView  `json:"held_inputs"`
}

func newSessionSummary(sess store.Session, state sessionstate.State) sessionSummary {
	created, updated := sess.CreatedAt.UTC(), sess.UpdatedAt.UTC()
	return sessionSummary{
		SessionID: sess.ID, AgentID: sess.AgentID, State: string(state), RuntimeStatus: sess.RuntimeStatus,
		Title: sess.Title, PermissionMode: sess.PermissionMode, RuntimeUnavailable: sess.RuntimeUnavailable,
		Archived: sess.ArchivedAt != nil, OutputSeq: sess.OutputSeq, LastOutputAt: utc(sess.LastOutputAt),
		ReadAt: utc(sess.ReadAt), Unread: unread(sess), CreatedAt: &created, UpdatedAt: &updated,
	}
}

// unread: the Session gained output after its owner last read it.
func unread(sess store.Session) bool {
	if sess.LastOutputAt == nil {
		return false
	}
	return sess.ReadAt == nil || sess.LastOutputAt.After(*sess.ReadAt)
}

func newSessionDetails(f store.SessionDetails) sessionDetails {
	sess := f.Session
	state := f.Facts().State()
	d := sessionDetails{
		sessionSummary:   newSessionSummary(sess, state),
		ModelName:        sess.ModelName,
		RuntimeError:     sess.RuntimeError,
		CurrentResponses: make([]responseView, len(f.OpenResponses)),
		HeldInputs:       make([]heldInputView, len(f.HeldInputs)),
	}
	for i, r := range f.OpenResponses {
		d.CurrentResponses[i] = newResponseView(r)
	}
	if f.LastResponse != nil {
		v := newResponseView(*f.LastResponse)
		d.LastResponse = &v
	}
	if len(f.OpenInteractions) > 0 {
		v := newInteractionView(f.OpenInteractions[0])
		d.PendingInteraction = &v
	}
	for i, in := range f.HeldInputs {
		d.HeldInputs[i] = heldInputView{InputID: in.ID, ClientMessageID: in.ClientMessageID, State: in.State, AcceptedAt: in.AcceptedAt.UTC()}
	}
	return d
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullJSON returns raw, or def when the column was NULL.
func nullJSON(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}
