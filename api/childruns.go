package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// childRunView is a child run as the Session's child-run endpoints show it; Status is
// the engine's own word. Stoppable says a stop request would be accepted now.
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

func newChildRunView(r store.ChildRun, engineStops bool) childRunView {
	return childRunView{ChildRunID: r.ID, ParentChildRunID: r.ParentID, ResponseID: r.ResponseID, Name: r.Name,
		Status: r.Status, Usage: nullJSON(r.Usage, "null"), Stoppable: engineStops && r.ControlRef != nil && *r.ControlRef != "" && !childRunEnded(r),
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
	engineStops, err := s.engineStopsChildRuns(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	engineStops = engineStops && runtimeHoldsChildRuns(sess)
	out := make([]childRunView, len(runs))
	for i, r := range runs {
		out[i] = newChildRunView(r, engineStops)
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

// stopChildRunResult is the data of an accepted child-run stop.
type stopChildRunResult struct {
	Status     string `json:"status"`
	ChildRunID string `json:"child_run_id"`
}

// childRunEnded reports whether the child run's engine-native status is a final one.
// Engines report their own words; these are the final words the installed engines
// use, so a stop of a child that already ended is refused rather than sent.
func childRunEnded(r store.ChildRun) bool {
	switch strings.ToLower(r.Status) {
	case "completed", "complete", "done", "succeeded", "success",
		"failed", "error", "errored",
		"stopped", "cancelled", "canceled", "killed", "interrupted", "aborted":
		return true
	}
	return false
}

// runtimeHoldsChildRuns reports whether the Session's runtime may still run child runs:
// an archived or deleted Session, a released box or a terminated runtime took them
// with it (the workflow drops a stop it can no longer hand over).
func runtimeHoldsChildRuns(sess store.Session) bool {
	return sess.ArchivedAt == nil && sess.DeletedAt == nil && !sess.RuntimeUnavailable && sess.Lifecycle != "terminated"
}

// stopChildRun asks the Agent program to stop one child run. It only signals the
// Session's workflow, which passes the request to the live runtime by the child's
// control reference; the child's new status arrives through the program's own
// reports. 409 when the engine cannot stop child runs, the child has no control
// reference, or it already ended.
func (s *Server) stopChildRun(c *gin.Context) {
	sess, run, err := s.loadChildRun(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := decodeBody(c, s.maxBodyBytes, &struct{}{}, true); err != nil {
		s.fail(c, err)
		return
	}
	supported, err := s.engineStopsChildRuns(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	data := map[string]any{"child_run_id": run.ID, "status": run.Status}
	switch {
	case !supported:
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the Agent program does not support stopping child runs", Data: data})
		return
	case run.ControlRef == nil || *run.ControlRef == "":
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the Agent program reported no way to stop this child run", Data: data})
		return
	case childRunEnded(run) || !runtimeHoldsChildRuns(sess):
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the child run has already ended", Data: data})
		return
	}
	// Nothing is written: the request lives only in the signal, so a signal that did
	// not reach the workflow is reported rather than logged away.
	if err := s.signaler.SignalSession(c.Request.Context(), sess.ID, workflows.SignalStopChildRun, workflows.StopChildRun{ChildRunID: run.ID}); err != nil {
		e := Unavailable("the Session's workflow could not be reached; try again", data)
		e.Err = err
		s.fail(c, e)
		return
	}
	writeOK(c, stopChildRunResult{Status: "accepted", ChildRunID: run.ID})
}

// engineStopsChildRuns reports whether the Session's Agent program declares child-run
// stop support.
func (s *Server) engineStopsChildRuns(c *gin.Context, sess store.Session) (bool, error) {
	agent, err := s.store.GetAgentByID(c.Request.Context(), sess.AgentID)
	if err != nil {
		return false, fmt.Errorf("load agent of session %s: %w", sess.ID, err)
	}
	adapter, err := s.agentAdapter(c.Request.Context(), agent)
	if errors.Is(err, engines.ErrNotInstalled) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return adapter.Capabilities().SupportsChildRunStop, nil
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
