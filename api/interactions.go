package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// answerRequest is the body of POST .../interactions/{interaction_id}/answer; the
// answer's shape follows the interaction's presentation.
type answerRequest struct {
	Answer json.RawMessage `json:"answer"`
}

// answerInteraction saves the owner's answer to an open interaction, then signals the
// workflow, which passes it to the runtime. The interaction stays open until the
// runtime closes it; an interaction already answered, withdrawn or expired is 409
// INTERACTION_NOT_OPEN.
func (s *Server) answerInteraction(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	id := c.Param("interaction_id")
	var req answerRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if len(req.Answer) == 0 || string(req.Answer) == "null" {
		s.fail(c, InvalidRequest("answer", "is required"))
		return
	}
	var answer engines.InteractionAnswer
	if err := decodeStrict(req.Answer, &answer, "answer."); err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	rec, err := s.store.GetInteractionByID(ctx, sess.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		s.fail(c, NotFound("interaction "+id))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if rec.State != store.InteractionOpen || rec.AnswerSavedAt != nil {
		s.fail(c, store.ErrInteractionNotOpen)
		return
	}
	var contract engines.InteractionContract
	if err := json.Unmarshal(rec.Contract, &contract); err != nil {
		s.fail(c, err)
		return
	}
	if err := engines.ValidateInteractionAnswer(contract, answer); err != nil {
		s.fail(c, InvalidRequest("answer", "%v", err))
		return
	}
	stored, _ := json.Marshal(answer)
	answeredBy := currentUser(c).ID
	saved, err := s.store.SaveInteractionAnswer(ctx, sess.ID, id, stored, &answeredBy)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.signal(c, sess.ID, workflows.SignalInteractionAnswered, workflows.InteractionAnswered{InteractionID: id})
	writeOK(c, newInteractionView(saved))
}

// interruptResult is the data of a successful interrupt.
type interruptResult struct {
	SessionID string `json:"session_id"`
	// Status is accepted (passed to the program) or idle (no open response or held
	// input was observed).
	Status    string `json:"status"`
	RequestID string `json:"request_id,omitempty"`
}

// interrupt asks the Agent program to stop the response in progress. It never
// withdraws queued messages: with no open response but held inputs it answers 409
// PENDING_INPUTS_NOT_CANCELLED naming them.
func (s *Server) interrupt(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := decodeBody(c, s.maxBodyBytes, &struct{}{}, true); err != nil {
		s.fail(c, err)
		return
	}
	f, err := s.store.GetSessionDetailsByID(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	// A terminated Session has no runtime to pass the request to: the workflow would
	// drop it, so a response recorded open there is not answered "accepted".
	running := len(f.OpenResponses) > 0 && f.Session.Lifecycle != store.LifecycleTerminated
	switch {
	case running:
		requestID := uuid.NewString()
		s.signal(c, sess.ID, workflows.SignalInterrupt, workflows.Interrupt{CancelQueued: false, RequestID: requestID})
		writeOK(c, interruptResult{SessionID: sess.ID, Status: "accepted", RequestID: requestID})
	case len(f.HeldInputs) > 0:
		ids := make([]string, len(f.HeldInputs))
		for i, in := range f.HeldInputs {
			ids[i] = in.ID
		}
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodePendingInputsNotCancelled,
			Message: "no response is open, but accepted messages are still held; they were not withdrawn and may still run",
			Data:    map[string]any{"input_ids": ids}})
	default:
		writeOK(c, interruptResult{SessionID: sess.ID, Status: "idle"})
	}
}

// archiveSession takes the Session out of the active list (409 SESSION_BUSY while the
// program works), then tells the workflow to release its runtime.
func (s *Server) archiveSession(c *gin.Context) {
	s.lifecycle(c, workflows.LifecycleArchive, s.store.ArchiveSession)
}

// deleteSession moves the Session to DELETED (409 SESSION_BUSY while the program
// works), then tells the workflow.
func (s *Server) deleteSession(c *gin.Context) {
	s.lifecycle(c, workflows.LifecycleDelete, s.store.DeleteSession)
}

// recoverSession brings a TERMINATED Session back to CREATING so a runtime is prepared
// again; any other state is 409 CONFLICT.
func (s *Server) recoverSession(c *gin.Context) {
	s.lifecycle(c, workflows.LifecycleRecover, s.store.RecoverSession)
}

func (s *Server) lifecycle(c *gin.Context, action workflows.LifecycleAction, write func(ctx context.Context, id string) (store.Session, error)) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := decodeBody(c, s.maxBodyBytes, &struct{}{}, true); err != nil {
		s.fail(c, err)
		return
	}
	saved, err := write(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.signal(c, sess.ID, workflows.SignalLifecycle, workflows.Lifecycle{Action: action})
	s.writeSession(c, saved)
}
