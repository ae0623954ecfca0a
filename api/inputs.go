package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// maxClientMessageIDLen caps a client_message_id.
const maxClientMessageIDLen = 200

// AdmissionRequest is what an admission policy decides on: one more input for a
// Session that already holds HeldInputs.
type AdmissionRequest struct {
	SessionID    string
	UserID       string
	HeldInputs   int
	ContentBytes int
}

// AdmissionPolicy is a deployment's admission policy. A non-nil error refuses the
// input with 429 ADMISSION_DENIED; its text is the message the caller sees.
type AdmissionPolicy interface {
	Admit(ctx context.Context, req AdmissionRequest) error
}

// heldInputsCap is an admission policy that decides on the Session's held-input count
// alone: the receipt applies it in the statement that accepts the input, with the
// Session's owner and lifecycle, and reads the Session first only when that statement
// refuses.
type heldInputsCap interface {
	AdmissionPolicy
	// HeldInputsCap is the held inputs at which the policy refuses (0: no cap).
	HeldInputsCap() int
}

// MaxHeldInputs is the default admission policy: it admits while the Session holds
// fewer than Limit inputs the program has not taken; a Limit of zero admits all.
type MaxHeldInputs struct {
	Limit int
}

var _ heldInputsCap = MaxHeldInputs{}

// HeldInputsCap implements heldInputsCap.
func (p MaxHeldInputs) HeldInputsCap() int { return p.Limit }

// Admit implements AdmissionPolicy.
func (p MaxHeldInputs) Admit(_ context.Context, req AdmissionRequest) error {
	if p.Limit > 0 && req.HeldInputs >= p.Limit {
		return fmt.Errorf("the Session already holds %d messages the Agent program has not taken (limit %d)", req.HeldInputs, p.Limit)
	}
	return nil
}

// inputRequest is the body of POST /sessions/{id}/inputs.
type inputRequest struct {
	Content         *string `json:"content"`
	ClientMessageID *string `json:"client_message_id"`
}

// inputReceipt names an accepted message. A repeated client_message_id returns the
// first receipt with duplicate true and the message's current state and recorded
// failure. OutputSeq is the Session's output position when the message was accepted:
// follow the stream from it to read the response.
type inputReceipt struct {
	SessionID       string        `json:"session_id"`
	InputID         string        `json:"input_id"`
	ClientMessageID *string       `json:"client_message_id"`
	AcceptedAt      time.Time     `json:"accepted_at"`
	State           string        `json:"state"`
	Duplicate       bool          `json:"duplicate"`
	Failure         *inputFailure `json:"failure"`
	OutputSeq       int64         `json:"output_seq"`
}

func newReceipt(in store.Input, duplicate bool, outputSeq int64) inputReceipt {
	r := inputReceipt{SessionID: in.SessionID, InputID: in.ID, ClientMessageID: in.ClientMessageID,
		AcceptedAt: in.AcceptedAt.UTC(), State: in.State, Duplicate: duplicate, OutputSeq: outputSeq}
	if in.FailureCode != nil {
		r.Failure = &inputFailure{Code: *in.FailureCode}
		if in.FailureMessage != nil {
			r.Failure.Message = *in.FailureMessage
		}
	}
	return r
}

// sendInput accepts one message into custody and returns its receipt at once: the row
// is committed before the receipt, then the Session's workflow is signalled. On the
// happy path the receipt is one statement (the token and its user come from the
// token cache): the insert, which checks the Session's owner, its lifecycle and the
// admission policy's cap on held inputs on the row it locks; a repeated
// client_message_id it admits takes one more, the first input's read. Anything that
// statement refuses is answered by sendCheckedInput, which reads the Session first and
// says why.
func (s *Server) sendInput(c *gin.Context) {
	// JSON escapes can take six bytes per content byte; the content's own limit is
	// checked after decoding, naming the field.
	var req inputRequest
	bodyErr := decodeBody(c, int64(6*s.maxInputBytes+4096), &req, false)
	if bodyErr == nil {
		bodyErr = s.validateInput(req)
	}
	policy, capped := s.admission.(heldInputsCap)
	_, shared := currentShare(c)
	id := c.Param("session_id")
	if bodyErr != nil || !capped || shared || !isUUID(id) {
		s.sendCheckedInput(c, req, bodyErr)
		return
	}
	accepted, admitted, err := s.store.AcceptGuardedInput(c.Request.Context(),
		store.NewInput{SessionID: id, ClientMessageID: req.ClientMessageID, Content: *req.Content},
		store.InputGuard{OwnerID: currentUser(c).ID, MaxHeld: policy.HeldInputsCap()})
	switch {
	case err != nil:
		s.fail(c, err)
	case !admitted:
		s.sendCheckedInput(c, req, nil)
	case accepted.Duplicate:
		// The guard admitted the repeat (only then does the insert meet the first
		// input): the caller's own Session, accepting input.
		s.answerDuplicate(c, accepted.Input, accepted.OutputSeq)
	default:
		s.accepted(c, accepted)
	}
}

// sendCheckedInput reads the Session, then accepts the message if the Session and the
// admission policy let it, refusing it saying why otherwise. A body that did not
// decode or validate (bodyErr) is refused once the caller's access to the Session is
// checked, so a Session the caller may not see answers not found whatever was sent.
func (s *Server) sendCheckedInput(c *gin.Context, req inputRequest, bodyErr error) {
	var held int
	sess, err := s.loadSessionWith(c, ownerAccess, func(ctx context.Context, id string) (store.Session, error) {
		sess, n, err := s.store.GetSessionWithHeldInputs(ctx, id)
		held = n
		return sess, err
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	if bodyErr != nil {
		s.fail(c, bodyErr)
		return
	}
	ctx := c.Request.Context()
	if state := (store.SessionFacts{Session: sess}).State(); !state.AcceptsInput() {
		if s.answeredRepeat(c, sess, req.ClientMessageID) {
			return
		}
		msg := fmt.Sprintf("the Session is %s; recover a TERMINATED Session before sending messages", state)
		if sess.RuntimeError != nil {
			msg += ": " + *sess.RuntimeError
		}
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeAgentRuntimeError, Message: msg})
		return
	}
	if err := s.admission.Admit(ctx, AdmissionRequest{SessionID: sess.ID, UserID: currentUser(c).ID, HeldInputs: held, ContentBytes: len(*req.Content)}); err != nil {
		if s.answeredRepeat(c, sess, req.ClientMessageID) {
			return
		}
		s.fail(c, &Error{Status: http.StatusTooManyRequests, Code: CodeAdmissionDenied, Message: err.Error(), Err: err})
		return
	}
	accepted, err := s.store.AcceptInput(ctx, store.NewInput{SessionID: sess.ID, ClientMessageID: req.ClientMessageID, Content: *req.Content})
	if err != nil {
		s.fail(c, err)
		return
	}
	if accepted.Duplicate {
		s.answerDuplicate(c, accepted.Input, accepted.OutputSeq)
		return
	}
	s.accepted(c, accepted)
}

// accepted answers a message just taken into custody. The receipt goes out first: the
// row is committed, which is custody, and a live runtime's Relay is handed the input
// on the row's notification without the workflow. While that Relay says it listens,
// nothing else is needed; otherwise the signal starts or wakes the workflow, and one
// lost with Temporal down is sent again by the workers' re-signal sweep.
func (s *Server) accepted(c *gin.Context, accepted store.Accepted) {
	s.metrics.InputsAccepted.Inc()
	in := accepted.Input
	writeOKNow(c, newReceipt(in, false, accepted.OutputSeq))
	if accepted.RelayListens {
		return
	}
	s.signalAfterAnswer(c, in.SessionID, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: in.ID})
}

// answeredRepeat answers a repeated client_message_id with its first receipt and
// reports whether the request is answered (a failed look-up is, with its error). A
// refusal asks it first, so a retried message gets its first receipt even when the
// Session no longer accepts input or admission would now refuse it.
func (s *Server) answeredRepeat(c *gin.Context, sess store.Session, clientMessageID *string) bool {
	if clientMessageID == nil {
		return false
	}
	prior, err := s.store.GetInputByClientMessageID(c.Request.Context(), sess.ID, *clientMessageID)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		s.fail(c, err)
		return true
	}
	s.answerDuplicate(c, prior, sess.OutputSeq)
	return true
}

// answerDuplicate returns the first receipt of a repeated client_message_id. A message
// still held is signalled again, which is harmless and recovers a lost first signal.
func (s *Server) answerDuplicate(c *gin.Context, in store.Input, outputSeq int64) {
	if in.State == store.InputPending || in.State == store.InputDelivered {
		s.signal(c, in.SessionID, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: in.ID})
	}
	writeOK(c, newReceipt(in, true, outputSeq))
}

func (s *Server) validateInput(req inputRequest) error {
	if req.Content == nil {
		return InvalidRequest("content", "is required")
	}
	if strings.TrimSpace(*req.Content) == "" {
		return InvalidRequest("content", "must not be empty")
	}
	if len(*req.Content) > s.maxInputBytes {
		return InvalidRequest("content", "is %d bytes, more than the limit of %d", len(*req.Content), s.maxInputBytes)
	}
	if id := req.ClientMessageID; id != nil {
		switch {
		case strings.TrimSpace(*id) == "":
			return InvalidRequest("client_message_id", "must not be empty when present")
		case utf8.RuneCountInString(*id) > maxClientMessageIDLen:
			return InvalidRequest("client_message_id", "must be at most %d characters", maxClientMessageIDLen)
		}
	}
	return nil
}
