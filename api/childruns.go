package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// childRunView is a child run as the Session's child-run endpoints show it; Status is
// the engine's own word.
type childRunView struct {
	ChildRunID       string          `json:"child_run_id"`
	ParentChildRunID *string         `json:"parent_child_run_id"`
	ResponseID       *string         `json:"response_id"`
	Name             string          `json:"name"`
	Status           string          `json:"status"`
	Usage            json.RawMessage `json:"usage"`
	Stoppable        bool            `json:"stoppable"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

func newChildRunView(r store.ChildRun) childRunView {
	return childRunView{ChildRunID: r.ID, ParentChildRunID: r.ParentID, ResponseID: r.ResponseID, Name: r.Name,
		Status: r.Status, Usage: nullJSON(r.Usage, "null"), Stoppable: r.ControlRef != nil && *r.ControlRef != "",
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// listChildRuns lists the Session's child runs; parent_child_run_id gives the tree.
func (s *Server) listChildRuns(c *gin.Context) {
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	runs, err := s.store.ListChildRunsBySession(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]childRunView, len(runs))
	for i, r := range runs {
		out[i] = newChildRunView(r)
	}
	writeOK(c, out)
}

// childRunMessage is one message of a child run as a UI message.
type childRunMessage struct {
	ID    string          `json:"id"`
	Role  string          `json:"role"`
	Parts json.RawMessage `json:"parts"`
}

// childRunMessages returns a child run's messages from its recorded data-subagent
// parts: the latest report of each message, in order of first report.
func (s *Server) childRunMessages(c *gin.Context) {
	sess, run, err := s.loadChildRun(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	parts, err := s.store.ListChildRunMessageParts(c.Request.Context(), sess.ID, run.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	var order []string
	latest := map[string]childRunMessage{}
	for _, p := range parts {
		var frame struct {
			Data engines.SubagentData `json:"data"`
		}
		if json.Unmarshal(p.Frame, &frame) != nil || frame.Data.Message == nil {
			continue
		}
		m := frame.Data.Message
		if _, seen := latest[m.MessageID]; !seen {
			order = append(order, m.MessageID)
		}
		latest[m.MessageID] = childRunMessage{ID: m.MessageID, Role: m.Role, Parts: m.Parts}
	}
	out := make([]childRunMessage, len(order))
	for i, id := range order {
		out[i] = latest[id]
	}
	writeOK(c, map[string]any{"child_run_id": run.ID, "messages": out})
}

// stopChildRun asks the Agent program to stop one child run. A child run without a
// control reference cannot be stopped (409).
func (s *Server) stopChildRun(c *gin.Context) {
	_, run, err := s.loadChildRun(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if run.ControlRef == nil || *run.ControlRef == "" {
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the Agent program does not support stopping this child run"})
		return
	}
	// The Session workflow declares no child-run stop signal yet, so the request cannot
	// reach the program; say so rather than pretend it was passed on.
	s.fail(c, Unavailable("stopping child runs is not available in this deployment yet", map[string]any{"child_run_id": run.ID}))
}

func (s *Server) loadChildRun(c *gin.Context, want access) (store.Session, store.ChildRun, error) {
	sess, err := s.loadSession(c, want)
	if err != nil {
		return store.Session{}, store.ChildRun{}, err
	}
	id := c.Param("child_run_id")
	run, err := s.store.GetChildRunByID(c.Request.Context(), sess.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, store.ChildRun{}, NotFound("child run " + id)
	}
	return sess, run, err
}
