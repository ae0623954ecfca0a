package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/store"
)

const (
	shareKey = "astrabox.share"
	// shareTokenParam is the path parameter that carries a share link's token.
	shareTokenParam = "share_token"
	// sharedPrefix is where a share link's viewer routes live, under /api/v1.
	sharedPrefix = "/shared/"
)

// Share link states as the API shows them.
const (
	shareActive  = "active"
	shareExpired = "expired"
	shareRevoked = "revoked"
)

// sharedRoutes are what a viewer holding a share link reads, without an account: the
// link's token in the path is the credential. There is no write among them, so a
// viewer's write has no route (404, or 405 on a read route).
var sharedRoutes = []route{
	{"GET", "/shared/:share_token", "Read a shared Session's details and the link's terms (share link viewers, no account)", h((*Server).getSharedSession)},
	{"GET", "/shared/:share_token/messages", "Read a shared Session's messages, paging back with before (share link viewers)", h((*Server).listMessages)},
	{"GET", "/shared/:share_token/history-blocks", "Read a shared Session's conversation with folded work (share link viewers)", h((*Server).listHistoryBlocks)},
	{"GET", "/shared/:share_token/history-blocks/:block_id", "Read the parts folded under one header of a shared Session (cursor=; share link viewers)", h((*Server).getHistoryBlock)},
	{"GET", "/shared/:share_token/stream", "Follow a shared Session's output (SSE) after after_seq (share link viewers)", h((*Server).streamSession)},
	{"GET", "/shared/:share_token/workspace/files", "List a folder of a shared Session's workspace, paged (share links that allow downloads)", h((*Server).listWorkspace)},
	{"GET", "/shared/:share_token/workspace/download", "Download a shared Session's workspace file or folder archive (share links that allow downloads)", h((*Server).downloadWorkspace)},
}

// shareView is a share link without its token.
type shareView struct {
	ShareID       string     `json:"share_id"`
	SessionID     string     `json:"session_id"`
	AllowDownload bool       `json:"allow_download"`
	State         string     `json:"state"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at"`
}

func newShareView(sh store.SessionShare, now time.Time) shareView {
	state := shareActive
	switch {
	case sh.RevokedAt != nil:
		state = shareRevoked
	case !now.Before(sh.ExpiresAt):
		state = shareExpired
	}
	return shareView{ShareID: sh.ID, SessionID: sh.SessionID, AllowDownload: sh.AllowDownload, State: state,
		CreatedAt: sh.CreatedAt.UTC(), ExpiresAt: sh.ExpiresAt.UTC(), RevokedAt: utc(sh.RevokedAt)}
}

// createdShare is a share link just created: the only answer that carries its token.
type createdShare struct {
	shareView
	Token string `json:"token"`
	// Path is the link's API root; its routes are Path, Path/messages,
	// Path/history-blocks and Path/stream.
	Path string `json:"path"`
}

// createShareRequest is the body of POST /sessions/{id}/shares.
type createShareRequest struct {
	ExpiresAt     *string `json:"expires_at"`
	AllowDownload *bool   `json:"allow_download"`
}

// createShare serves POST /sessions/{id}/shares: the owner creates a read-only link.
func (s *Server) createShare(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req createShareRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.ExpiresAt == nil {
		s.fail(c, InvalidRequest("expires_at", "is required: a share link always expires"))
		return
	}
	expiresAt, err := s.futureTime("expires_at", req.ExpiresAt)
	if err != nil {
		s.fail(c, err)
		return
	}
	if sess.Lifecycle == store.LifecycleDeleted {
		s.fail(c, store.ErrWrongLifecycle)
		return
	}
	in := store.NewSessionShare{SessionID: sess.ID, CreatedBy: currentUser(c).ID, ExpiresAt: *expiresAt}
	if req.AllowDownload != nil {
		in.AllowDownload = *req.AllowDownload
	}
	sh, token, err := s.store.CreateSessionShare(c.Request.Context(), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	writeOK(c, createdShare{shareView: newShareView(sh, s.now()), Token: token, Path: "/api/v1" + sharedPrefix + token})
}

// listShares serves GET /sessions/{id}/shares: the Session's links without tokens.
func (s *Server) listShares(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	shares, err := s.store.ListSessionShares(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	now := s.now()
	out := make([]shareView, len(shares))
	for i, sh := range shares {
		out[i] = newShareView(sh, now)
	}
	writeOK(c, out)
}

// revokeShare serves POST /sessions/{id}/shares/{share_id}/revoke. The link answers 404
// from the next request on; a stream it holds ends at once.
func (s *Server) revokeShare(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	id := c.Param("share_id")
	if !isUUID(id) {
		s.fail(c, NotFound("share link "+id))
		return
	}
	sh, err := s.store.RevokeSessionShare(c.Request.Context(), sess.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		s.fail(c, NotFound("share link "+id))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, newShareView(sh, s.now()))
}

// authenticateShare resolves the path's share link token for the viewer routes: an
// unknown, revoked or expired link, or one whose Session is deleted or whose owner is
// disabled, is 404, as if it never existed. Neither the token nor its hash is logged.
func (s *Server) authenticateShare(c *gin.Context) {
	sh, err := s.store.GetActiveSessionShare(c.Request.Context(), c.Param(shareTokenParam), s.now())
	if errors.Is(err, store.ErrNotFound) {
		s.fail(c, NotFound("share link"))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Set(shareKey, sh)
	c.Next()
}

// currentShare returns the share link a viewer's request came with.
func currentShare(c *gin.Context) (store.SessionShare, bool) {
	v, ok := c.Get(shareKey)
	if !ok {
		return store.SessionShare{}, false
	}
	sh, ok := v.(store.SessionShare)
	return sh, ok
}

// loadSharedSession returns the Session a viewer's share link opens, for reading only.
func (s *Server) loadSharedSession(c *gin.Context, sh store.SessionShare, want access) (store.Session, error) {
	if want != readAccess {
		return store.Session{}, forbidden("a share link only reads the Session")
	}
	sess, err := s.store.GetSessionByID(c.Request.Context(), sh.SessionID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sess.Lifecycle == store.LifecycleDeleted) {
		return store.Session{}, NotFound("share link")
	}
	return sess, err
}

// sharedSession is GET /shared/{token}: the Session as its owner reads it, and what
// the link allows.
type sharedSession struct {
	Session sessionDetails `json:"session"`
	Share   sharedTerms    `json:"share"`
}

// sharedTerms is what a viewer learns of the link: never who made it or its id.
type sharedTerms struct {
	AllowDownload bool      `json:"allow_download"`
	ExpiresAt     time.Time `json:"expires_at"`
}

func (s *Server) getSharedSession(c *gin.Context) {
	sh, _ := currentShare(c)
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
	writeOK(c, sharedSession{Session: newSessionDetails(f), Share: sharedTerms{AllowDownload: sh.AllowDownload, ExpiresAt: sh.ExpiresAt.UTC()}})
}

// loadSessionForDownload authorizes reading the request's Session's workspace files
// and returns the Session: the owner and administrators may download (readAccess); a
// share link viewer only when the link was created with allow_download, otherwise 403
// FORBIDDEN. The viewer's routes (under /shared/:share_token) and the account's share
// their handlers.
func (s *Server) loadSessionForDownload(c *gin.Context) (store.Session, error) {
	if sh, ok := currentShare(c); ok && !sh.AllowDownload {
		return store.Session{}, forbidden("this share link does not allow downloading workspace files")
	}
	return s.loadSession(c, readAccess)
}

// streamCredential names what a stream counts against its cap (the API token, or the
// share link) and how to re-check that it still holds.
func (s *Server) streamCredential(c *gin.Context) (string, func() (bool, error)) {
	if sh, ok := currentShare(c); ok {
		token := c.Param(shareTokenParam)
		return "share:" + sh.ID, func() (bool, error) {
			_, err := s.store.GetActiveSessionShare(c.Request.Context(), token, s.now())
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		}
	}
	return currentToken(c).ID, func() (bool, error) { return s.tokenStillValid(c) }
}

// pathForMessages is the request path as an error message may show it: a share link's
// token is replaced by its parameter name, since messages reach the logs.
func pathForMessages(path string) string {
	rest, ok := strings.CutPrefix(path, "/api/v1"+sharedPrefix)
	if !ok {
		return path
	}
	if _, tail, found := strings.Cut(rest, "/"); found {
		return "/api/v1" + sharedPrefix + "{share_token}/" + tail
	}
	return "/api/v1" + sharedPrefix + "{share_token}"
}

// viewerWriteRefused answers a write sent to a share link's routes, whatever its token:
// links only read.
func viewerWriteRefused(c *gin.Context) (*Error, bool) {
	if !strings.HasPrefix(c.Request.URL.Path, "/api/v1"+sharedPrefix) {
		return nil, false
	}
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil, false
	}
	return forbidden("a share link only reads the Session; writes need an account"), true
}
