package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
)

const (
	userKey  = "astrabox.user"
	tokenKey = "astrabox.token"
	// plaintextKey keeps the request's bearer token in memory, for a stream to re-check.
	plaintextKey = "astrabox.token_plaintext"
)

// tokenTouchInterval is how stale a token's last_used_at may get: it is written at most
// once per interval per token, not on every request.
const tokenTouchInterval = time.Minute

// authenticate resolves the bearer API token to its user; a missing, unknown,
// revoked or expired token is 401 UNAUTHORIZED. It runs before any handler reads a
// body, and a refusal closes the connection instead of reading the rest of the body
// (which net/http does to keep a connection alive), so an unauthenticated client
// cannot hold a connection by trickling one.
func (s *Server) authenticate(c *gin.Context) {
	token, err := requestToken(c.Request)
	if err != nil {
		s.refuseUnauthenticated(c, err)
		return
	}
	now := s.now()
	user, tok, err := s.tokens.get(c.Request.Context(), token, now, func() (store.User, store.APIToken, error) {
		return s.store.GetUserByAPIToken(c.Request.Context(), token, now)
	})
	if errors.Is(err, store.ErrNotFound) {
		s.refuseUnauthenticated(c, Unauthorized("the token is unknown, revoked or expired"))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.touchToken(c, tok, token)
	c.Set(userKey, user)
	c.Set(tokenKey, tok)
	c.Set(plaintextKey, token)
	c.Next()
}

// Browsers cannot set headers on a WebSocket, so a WebSocket upgrade without an
// Authorization header may carry the token as a subprotocol instead: the client offers
// terminalSubprotocol and bearerSubprotocolPrefix+token, and the server answers with
// terminalSubprotocol alone, so the token is never echoed. No cookie is involved, so
// another site cannot open the socket with the viewer's credentials.
const (
	terminalSubprotocol     = "astrabox.terminal"
	bearerSubprotocolPrefix = "astrabox.bearer."
)

// requestToken returns the request's API token: its Authorization: Bearer header or,
// on a WebSocket upgrade without one, its bearer subprotocol.
func requestToken(r *http.Request) (string, error) {
	header := r.Header.Get("Authorization")
	if header != "" || !isWebSocketUpgrade(r) {
		return bearerToken(header)
	}
	for _, offered := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(offered, ",") {
			if token, ok := strings.CutPrefix(strings.TrimSpace(p), bearerSubprotocolPrefix); ok && token != "" {
				return token, nil
			}
		}
	}
	return "", Unauthorized("an Authorization: Bearer <token> header, or the WebSocket subprotocols " +
		terminalSubprotocol + " and " + bearerSubprotocolPrefix + "<token>, are required")
}

func isWebSocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(header string) (string, error) {
	if header == "" {
		return "", Unauthorized("an Authorization: Bearer <token> header is required")
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", Unauthorized("the Authorization header must be Bearer <token>")
	}
	return strings.TrimSpace(token), nil
}

// refuseUnauthenticated answers 401 and closes the connection without reading the
// body: Connection: close stops net/http from reading it before the answer, and a read
// deadline already passed stops it from reading it after (closing the body reads up
// to 256 KiB of what is left, looking for its end).
func (s *Server) refuseUnauthenticated(c *gin.Context, err error) {
	c.Header("Connection", "close")
	s.fail(c, err)
	if c.Request.ContentLength == 0 {
		return
	}
	if err := http.NewResponseController(c.Writer).SetReadDeadline(time.Now()); err != nil && !errors.Is(err, http.ErrNotSupported) {
		RequestLogger(c, s.log).Warn("cut unauthenticated request body", zap.Error(err))
	}
}

// touchToken records that the token was used, at most once per tokenTouchInterval. A
// failed write is logged and does not refuse the request: last_used_at informs
// administrators, it guards nothing.
func (s *Server) touchToken(c *gin.Context, tok store.APIToken, plaintext string) {
	now := s.now()
	if tok.LastUsedAt != nil && now.Sub(*tok.LastUsedAt) < tokenTouchInterval {
		return
	}
	if err := s.store.TouchAPIToken(c.Request.Context(), tok.ID, now, tokenTouchInterval); err != nil {
		RequestLogger(c, s.log).Warn("record api token use", zap.String("token_id", tok.ID), zap.Error(err))
		return
	}
	s.tokens.touched(plaintext, now)
}

// currentToken returns the API token of the request.
func currentToken(c *gin.Context) store.APIToken {
	t, _ := c.Get(tokenKey)
	tok, _ := t.(store.APIToken)
	return tok
}

// tokenStillValid reports whether the request's token is still neither revoked nor
// expired, and its user still exists. A token found gone empties the token cache as
// the revocation's announcement would: a stream's re-check can see the revocation
// before the announcement arrives, and its client's next request must be refused.
func (s *Server) tokenStillValid(c *gin.Context) (bool, error) {
	plaintext := c.GetString(plaintextKey)
	_, _, err := s.store.GetUserByAPIToken(c.Request.Context(), plaintext, s.now())
	if errors.Is(err, store.ErrNotFound) {
		s.tokens.flush()
		return false, nil
	}
	return err == nil, err
}

// currentUser returns the authenticated user of the request.
func currentUser(c *gin.Context) store.User {
	u, _ := c.Get(userKey)
	user, _ := u.(store.User)
	return user
}

// forbidden refuses an authenticated user an operation reserved to others.
func forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg}
}

// requireAdmin refuses members an administration route.
func requireAdmin(c *gin.Context) error {
	if !currentUser(c).IsAdmin() {
		return forbidden("this operation needs the admin role")
	}
	return nil
}

// access is what a request wants to do with a Session.
type access int

const (
	// readAccess: the owner, or an administrator, may read a Session.
	readAccess access = iota
	// ownerAccess: only the owner may change a Session.
	ownerAccess
)

// loadSession returns the path's Session if the user may access it that way. Another
// user's Session is 404, as if it did not exist; an administrator may read it but not
// change it (403). A share link viewer's request reads the link's Session, and only
// reads it.
func (s *Server) loadSession(c *gin.Context, want access) (store.Session, error) {
	return s.loadSessionWith(c, want, s.store.GetSessionByID)
}

// loadSessionWith is loadSession reading the Session with get, for a handler that reads
// more in the same statement. A share link's Session is read as loadSession reads it.
func (s *Server) loadSessionWith(c *gin.Context, want access, get func(ctx context.Context, id string) (store.Session, error)) (store.Session, error) {
	if sh, ok := currentShare(c); ok {
		return s.loadSharedSession(c, sh, want)
	}
	id := c.Param("session_id")
	if !isUUID(id) {
		return store.Session{}, NotFound("session " + id)
	}
	sess, err := get(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, NotFound("session " + id)
	}
	if err != nil {
		return store.Session{}, err
	}
	user := currentUser(c)
	if sess.UserID == user.ID {
		return sess, nil
	}
	if !user.IsAdmin() {
		return store.Session{}, NotFound("session " + id)
	}
	if want == ownerAccess {
		return store.Session{}, forbidden("only the Session's owner can change it")
	}
	return sess, nil
}
