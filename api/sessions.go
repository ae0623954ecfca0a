package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

const (
	// idempotencyKeyHeader names the key that makes Session creation idempotent.
	idempotencyKeyHeader = "Idempotency-Key"
	// maxIdempotencyKeyLen caps the Idempotency-Key header.
	maxIdempotencyKeyLen = 200
	// defaultListLimit and maxListLimit bound a page of the conversation list.
	defaultListLimit = 20
	maxListLimit     = 100
	// maxUnpagedSessions caps the console's unpaged array; a longer list is cut there
	// and says so (headerListTruncated, headerNextCursor).
	maxUnpagedSessions = 1000
	// headerListTruncated is "true" on an unpaged list that holds only the first
	// entries, "false" on a complete one.
	headerListTruncated = "X-List-Truncated"
	// headerNextCursor, on a cut unpaged list, is the cursor that continues it with
	// GET /sessions?cursor=...
	headerNextCursor = "X-Next-Cursor"
)

// createdSession is the data of a successful Session creation.
type createdSession struct {
	SessionID      string `json:"session_id"`
	AgentID        string `json:"agent_id"`
	DeploymentName string `json:"deployment_name"`
}

// createSession starts a Session from the path's Agent. The body is {}: the Agent
// selects the RuntimeProfile, and nothing else is accepted. The same Idempotency-Key
// for the same user and Agent returns the same Session.
func (s *Server) createSession(c *gin.Context) {
	agent, err := s.loadAgent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var body struct{}
	if err := decodeBody(c, s.maxBodyBytes, &body, true); err != nil {
		s.fail(c, err)
		return
	}
	key, err := headerText(c, idempotencyKeyHeader)
	if err != nil {
		s.fail(c, err)
		return
	}
	if utf8.RuneCountInString(key) > maxIdempotencyKeyLen {
		s.fail(c, InvalidRequest(idempotencyKeyHeader, "must be at most %d characters", maxIdempotencyKeyLen))
		return
	}
	sess, created, err := s.store.CreateSessionIdempotent(c.Request.Context(), store.NewSession{
		UserID: currentUser(c).ID, AgentID: agent.ID, IdempotencyKey: key, MaxLiveBoxes: s.maxLiveBoxes,
		DefaultPermissionMode: s.defaultPermissionMode(c.Request.Context(), agent, engines.SessionKindAgentChat),
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	// The row is the truth: a failed start is logged, and the next signal (any input)
	// starts the workflow anyway.
	if err := s.signaler.StartSession(c.Request.Context(), sess.ID); err != nil {
		RequestLogger(c, s.log).Warn("start session workflow", zap.String("session_id", sess.ID), zap.Error(err))
	}
	RequestLogger(c, s.log).Debug("session created", zap.String("session_id", sess.ID), zap.Bool("new", created))
	writeOK(c, createdSession{SessionID: sess.ID, AgentID: agent.ID, DeploymentName: agent.Name})
}

// defaultPermissionMode is the mode the Agent's program declares a new Session of kind
// starts in (PermissionModeDefaults), used when the Agent sets none; empty when the
// program is not installed here (or its profile cannot be read) or declares no default.
func (s *Server) defaultPermissionMode(ctx context.Context, agent store.Agent, kind engines.SessionKind) string {
	adapter, err := s.agentAdapter(ctx, agent)
	if err != nil {
		return ""
	}
	return adapter.Capabilities().PermissionModeDefaults[kind]
}

func (s *Server) getSession(c *gin.Context) {
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	f, err := s.store.GetSessionDetailsByID(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	d := newSessionDetails(f)
	if currentUser(c).IsAdmin() && len(f.Session.RuntimeInfo) > 0 {
		// What ran, as its last activation observed it: operator evidence, read
		// from the row, never by waking the runtime.
		d.RuntimeInfo = json.RawMessage(f.Session.RuntimeInfo)
	}
	writeOK(c, d)
}

// sessionPage is a paged conversation list.
type sessionPage struct {
	Sessions   []sessionSummary `json:"sessions"`
	HasMore    bool             `json:"has_more"`
	NextCursor *string          `json:"next_cursor"`
}

// listSessions lists the user's conversations, newest activity first. With page (or
// cursor) it returns a page {sessions, has_more, next_cursor}; without, the console's
// unpaged array. Archived Sessions are listed only with archived=true.
func (s *Server) listSessions(c *gin.Context) {
	if err := knownQuery(c, "page", "limit", "cursor", "archived"); err != nil {
		s.fail(c, err)
		return
	}
	archived, err := queryBool(c, "archived")
	if err != nil {
		s.fail(c, err)
		return
	}
	_, paged := c.GetQuery("page")
	page, err := queryInt(c, "page", 1, 1, 1_000_000)
	if err != nil {
		s.fail(c, err)
		return
	}
	q := store.SessionListQuery{UserID: currentUser(c).ID, Archived: archived}
	if raw, ok := c.GetQuery("cursor"); ok {
		after, err := decodeListCursor(raw)
		if err != nil {
			s.fail(c, err)
			return
		}
		q.After, paged = &after, true
	}
	def, most := int64(defaultListLimit), int64(maxListLimit)
	if !paged {
		def, most = maxUnpagedSessions, maxUnpagedSessions
	}
	limit, err := queryInt(c, "limit", def, 1, most)
	if err != nil {
		s.fail(c, err)
		return
	}
	q.Limit = int(limit) + 1
	if q.After == nil {
		q.Offset = int((page - 1) * limit)
	}
	rows, err := s.store.ListSessionFactsByUser(c.Request.Context(), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	hasMore := len(rows) > int(limit)
	if hasMore {
		rows = rows[:limit]
	}
	out := make([]sessionSummary, len(rows))
	for i, r := range rows {
		out[i] = newSessionSummary(r.Session, r.State())
	}
	var next *string
	if hasMore {
		last := rows[len(rows)-1]
		cursor := encodeListCursor(store.SessionListCursor{LastActivityAt: last.LastActivityAt, ID: last.ID})
		next = &cursor
	}
	if !paged {
		// The unpaged array has no room for paging fields: a cut list says so in
		// headers, with the cursor that continues it in the paged form.
		c.Header(headerListTruncated, strconv.FormatBool(hasMore))
		if next != nil {
			c.Header(headerNextCursor, *next)
		}
		writeOK(c, out)
		return
	}
	writeOK(c, sessionPage{Sessions: out, HasMore: hasMore, NextCursor: next})
}

// encodeListCursor makes the opaque next_cursor of a list page.
func encodeListCursor(cur store.SessionListCursor) string {
	raw := strconv.FormatInt(cur.LastActivityAt.UnixMicro(), 10) + "." + cur.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeListCursor(s string) (store.SessionListCursor, error) {
	bad := InvalidRequest("cursor", "is not a cursor this list returned")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.SessionListCursor{}, bad
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok || !isUUID(id) {
		return store.SessionListCursor{}, bad
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return store.SessionListCursor{}, bad
	}
	return store.SessionListCursor{LastActivityAt: time.UnixMicro(us).UTC(), ID: id}, nil
}

// renameRequest is the body of PATCH /sessions/{id}.
type renameRequest struct {
	Title *string `json:"title"`
}

// renameSession sets the Session's title: one line of at most 200 characters, runs
// of whitespace (line breaks included) stored as one space. The list order is kept.
func (s *Server) renameSession(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req renameRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.Title == nil {
		s.fail(c, InvalidRequest("title", "is required"))
		return
	}
	saved, err := s.store.RenameSession(c.Request.Context(), sess.ID, currentUser(c).ID, *req.Title)
	if errors.Is(err, store.ErrInvalidTitle) {
		s.fail(c, InvalidRequest("title", "must be one line of 1 to %d characters", store.MaxTitleLen))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeSession(c, saved)
}

// permissionModeRequest is the body of POST /sessions/{id}/permission-mode.
type permissionModeRequest struct {
	PermissionMode *string `json:"permission_mode"`
}

// setPermissionMode sets a mode the Session's Agent program declares through the
// Session's workflow, which applies it to a running program before storing it, or
// stores it for the next one. A mode the program refuses is answered as
// PERMISSION_MODE_REFUSED with the program's words, and the Session keeps its mode.
func (s *Server) setPermissionMode(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req permissionModeRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if err := requiredString("permission_mode", req.PermissionMode); err != nil {
		s.fail(c, err)
		return
	}
	agent, err := s.store.GetAgentByID(c.Request.Context(), sess.AgentID)
	if err != nil {
		s.fail(c, err)
		return
	}
	adapter, err := s.agentAdapter(c.Request.Context(), agent)
	if errors.Is(err, engines.ErrNotInstalled) {
		s.fail(c, InvalidRequest("permission_mode", "the Agent program %q is not installed", agent.EngineKind))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	caps := adapter.Capabilities()
	if !caps.HasPermissionMode(*req.PermissionMode) {
		s.fail(c, InvalidRequest("permission_mode", "%q is not a permission mode of %s (accepted: %s)", *req.PermissionMode, agent.EngineKind, fmtList(caps.PermissionModes)))
		return
	}
	if sess.Lifecycle == store.LifecycleDeleted {
		s.fail(c, fmt.Errorf("set permission mode of session %s: %w", sess.ID, store.ErrWrongLifecycle))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), permissionModeTimeout)
	defer cancel()
	if _, err := s.signaler.SetPermissionMode(ctx, sess.ID, *req.PermissionMode); err != nil {
		s.fail(c, permissionModeError(err, *req.PermissionMode))
		return
	}
	saved, err := s.store.GetSessionByID(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeSession(c, saved)
}

// permissionModeTimeout bounds the wait for the workflow's answer: a live program
// answers in moments, but a host that stopped answering is noticed only after the
// host queue's schedule-to-start timeout.
const permissionModeTimeout = time.Minute

// permissionModeError answers a failed permission-mode update: the program's refusal
// in its own words, or a workflow that could not confirm the mode.
func permissionModeError(err error, mode string) *Error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == workflows.ErrPermissionModeRefused {
		return &Error{Status: http.StatusConflict, Code: CodePermissionModeRefused,
			Message: fmt.Sprintf("the Agent program refused the permission mode %q; the Session keeps its mode", mode),
			Data:    map[string]any{"permission_mode": mode, "program_message": app.Message()}, Err: err}
	}
	e := Unavailable("the Session's workflow could not confirm the permission mode; read the Session and try again",
		map[string]any{"permission_mode": mode})
	e.Err = err
	return e
}

// markRead records that the owner read the Session now.
func (s *Server) markRead(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	saved, err := s.store.MarkSessionRead(c.Request.Context(), sess.ID, currentUser(c).ID, time.Time{})
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeSession(c, saved)
}

// writeSession answers with the Session's complete current details, read after the
// change that saved it.
func (s *Server) writeSession(c *gin.Context, saved store.Session) {
	f, err := s.store.GetSessionDetailsByID(c.Request.Context(), saved.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, newSessionDetails(f))
}

// signal hands a signal to the Session's workflow after its row was written. A failed
// signal is logged, not returned: the row is the truth, and the workflow re-reads it on
// its next signal (a retried request signals again).
// signalAfterAnswer is signal for a request already answered: the client may close the
// connection now, which must not cancel the signal.
func (s *Server) signalAfterAnswer(c *gin.Context, sessionID, name string, payload any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), signalAfterAnswerTimeout)
	defer cancel()
	if err := s.signaler.SignalSession(ctx, sessionID, name, payload); err != nil {
		RequestLogger(c, s.log).Warn("signal session workflow", zap.String("session_id", sessionID), zap.String("signal", name), zap.Error(err))
	}
}

// signalAfterAnswerTimeout bounds a signal no client waits for; the re-signal sweep
// covers one that does not arrive.
const signalAfterAnswerTimeout = 30 * time.Second

func (s *Server) signal(c *gin.Context, sessionID, name string, payload any) {
	if err := s.signaler.SignalSession(c.Request.Context(), sessionID, name, payload); err != nil {
		RequestLogger(c, s.log).Warn("signal session workflow", zap.String("session_id", sessionID), zap.String("signal", name), zap.Error(err))
	}
}
