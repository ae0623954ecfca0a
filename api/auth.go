package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/store"
)

const userKey = "astrabox.user"

// authenticate resolves the bearer API token to its user; a missing, unknown,
// revoked or expired token is 401 UNAUTHORIZED.
func (s *Server) authenticate(c *gin.Context) {
	header := c.GetHeader("Authorization")
	scheme, token, ok := strings.Cut(header, " ")
	if header == "" {
		s.fail(c, Unauthorized("an Authorization: Bearer <token> header is required"))
		return
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		s.fail(c, Unauthorized("the Authorization header must be Bearer <token>"))
		return
	}
	user, _, err := s.store.GetUserByAPIToken(c.Request.Context(), strings.TrimSpace(token), s.now())
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.fail(c, Unauthorized("the token is unknown, revoked or expired"))
			return
		}
		s.fail(c, err)
		return
	}
	c.Set(userKey, user)
	c.Next()
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
// change it (403).
func (s *Server) loadSession(c *gin.Context, want access) (store.Session, error) {
	id := c.Param("session_id")
	if !isUUID(id) {
		return store.Session{}, NotFound("session " + id)
	}
	sess, err := s.store.GetSessionByID(c.Request.Context(), id)
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
