package api

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/store"
)

const (
	// maxEmailLen is the longest address RFC 5321 allows.
	maxEmailLen = 254
	// maxDisplayNameLen and maxTokenNameLen bound the names people give.
	maxDisplayNameLen = 200
	maxTokenNameLen   = 100
)

// Token states as the API shows them.
const (
	tokenActive  = "active"
	tokenExpired = "expired"
	tokenRevoked = "revoked"
)

// userView is a user as the API shows it.
type userView struct {
	UserID      string     `json:"user_id"`
	Email       string     `json:"email"`
	DisplayName string     `json:"display_name"`
	Role        string     `json:"role"`
	Disabled    bool       `json:"disabled"`
	DisabledAt  *time.Time `json:"disabled_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

func newUserView(u store.User) userView {
	return userView{UserID: u.ID, Email: u.Email, DisplayName: u.DisplayName, Role: u.Role, Disabled: u.Disabled(),
		DisabledAt: utc(u.DisabledAt), CreatedAt: u.CreatedAt.UTC(), UpdatedAt: u.UpdatedAt.UTC()}
}

// tokenView is an API token without its secret: the prefix identifies it to people.
type tokenView struct {
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

func newTokenView(t store.APIToken, now time.Time) tokenView {
	state := tokenActive
	switch {
	case t.RevokedAt != nil:
		state = tokenRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		state = tokenExpired
	}
	return tokenView{TokenID: t.ID, UserID: t.UserID, Name: t.Name, Prefix: t.Prefix, State: state, CreatedAt: t.CreatedAt.UTC(),
		LastUsedAt: utc(t.LastUsedAt), ExpiresAt: utc(t.ExpiresAt), RevokedAt: utc(t.RevokedAt)}
}

// issuedToken is a token just issued: the only answer that carries its secret.
type issuedToken struct {
	tokenView
	Secret string `json:"secret"`
}

// meView is GET /me: the caller and the token the request used.
type meView struct {
	User  userView  `json:"user"`
	Token tokenView `json:"token"`
}

// getMe serves GET /me.
func (s *Server) getMe(c *gin.Context) {
	writeOK(c, meView{User: newUserView(currentUser(c)), Token: newTokenView(currentToken(c), s.now())})
}

// createUserRequest is the body of POST /admin/users.
type createUserRequest struct {
	Email       *string `json:"email"`
	DisplayName *string `json:"display_name"`
	Role        *string `json:"role"`
}

// createUser serves POST /admin/users.
func (s *Server) createUser(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	var req createUserRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	in, err := req.validate()
	if err != nil {
		s.fail(c, err)
		return
	}
	u, err := s.store.CreateUser(c.Request.Context(), in)
	if errors.Is(err, store.ErrDuplicate) {
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "a user with this email already exists", Err: err})
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, newUserView(u))
}

func (r createUserRequest) validate() (store.NewUser, error) {
	if err := requiredString("email", r.Email); err != nil {
		return store.NewUser{}, err
	}
	email := strings.TrimSpace(*r.Email)
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.ContainsAny(email, " \t\r\n") || len(email) > maxEmailLen {
		return store.NewUser{}, InvalidRequest("email", "must be an email address of at most %d bytes", maxEmailLen)
	}
	in := store.NewUser{Email: email, Role: store.RoleMember}
	if r.DisplayName != nil {
		name := strings.TrimSpace(*r.DisplayName)
		if utf8.RuneCountInString(name) > maxDisplayNameLen || strings.ContainsAny(name, "\r\n") {
			return store.NewUser{}, InvalidRequest("display_name", "must be one line of at most %d characters", maxDisplayNameLen)
		}
		in.DisplayName = name
	}
	if r.Role != nil {
		if *r.Role != store.RoleMember && *r.Role != store.RoleAdmin {
			return store.NewUser{}, InvalidRequest("role", "must be %s or %s, not %q", store.RoleMember, store.RoleAdmin, *r.Role)
		}
		in.Role = *r.Role
	}
	return in, nil
}

// listUsers serves GET /admin/users.
func (s *Server) listUsers(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	users, err := s.store.ListUsers(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]userView, len(users))
	for i, u := range users {
		out[i] = newUserView(u)
	}
	writeOK(c, out)
}

// loadUser returns the path's user for an administrator.
func (s *Server) loadUser(c *gin.Context) (store.User, error) {
	if err := requireAdmin(c); err != nil {
		return store.User{}, err
	}
	id := c.Param("user_id")
	if !isUUID(id) {
		return store.User{}, NotFound("user " + id)
	}
	u, err := s.store.GetUserByID(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, NotFound("user " + id)
	}
	return u, err
}

// getUser serves GET /admin/users/{user_id}.
func (s *Server) getUser(c *gin.Context) {
	u, err := s.loadUser(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, newUserView(u))
}

func (s *Server) disableUser(c *gin.Context) { s.setUserDisabled(c, true) }
func (s *Server) enableUser(c *gin.Context)  { s.setUserDisabled(c, false) }

// setUserDisabled serves POST /admin/users/{user_id}/disable and /enable. An
// administrator cannot disable themselves, so a deployment never locks out the
// person acting on it by mistake.
func (s *Server) setUserDisabled(c *gin.Context, disabled bool) {
	u, err := s.loadUser(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if disabled && u.ID == currentUser(c).ID {
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "you cannot disable your own account"})
		return
	}
	u, err = s.store.SetUserDisabled(c.Request.Context(), u.ID, disabled, s.now())
	if err != nil {
		s.fail(c, err)
		return
	}
	// This process refuses the user's tokens from the next request on; the others
	// when the change's announcement reaches them.
	s.tokens.flush()
	writeOK(c, newUserView(u))
}

// issueTokenRequest is the body of POST /admin/users/{user_id}/tokens.
type issueTokenRequest struct {
	Name *string `json:"name"`
	// ExpiresAt is an RFC 3339 time with a timezone; absent, the token never expires.
	ExpiresAt *string `json:"expires_at"`
}

// issueToken serves POST /admin/users/{user_id}/tokens: the answer carries the
// token's secret, the only time it is shown; the database keeps its hash.
func (s *Server) issueToken(c *gin.Context) {
	u, err := s.loadUser(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req issueTokenRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if err := requiredString("name", req.Name); err != nil {
		s.fail(c, err)
		return
	}
	name := strings.TrimSpace(*req.Name)
	if utf8.RuneCountInString(name) > maxTokenNameLen || strings.ContainsAny(name, "\r\n") {
		s.fail(c, InvalidRequest("name", "must be one line of at most %d characters", maxTokenNameLen))
		return
	}
	expiresAt, err := s.futureTime("expires_at", req.ExpiresAt)
	if err != nil {
		s.fail(c, err)
		return
	}
	if u.Disabled() {
		s.fail(c, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the user is disabled; enable them before issuing a token"})
		return
	}
	tok, secret, err := s.store.CreateAPIToken(c.Request.Context(), u.ID, name, expiresAt)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	writeOK(c, issuedToken{tokenView: newTokenView(tok, s.now()), Secret: secret})
}

// futureTime parses an optional RFC 3339 time that must lie in the future.
func (s *Server) futureTime(field string, raw *string) (*time.Time, error) {
	if raw == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, *raw)
	if err != nil {
		return nil, InvalidRequest(field, "must be an RFC 3339 time with a timezone, such as 2026-05-18T12:00:00Z")
	}
	if !t.After(s.now()) {
		return nil, InvalidRequest(field, "must be in the future")
	}
	return &t, nil
}

// listTokens serves GET /admin/users/{user_id}/tokens: the user's tokens without
// their secrets, revoked and expired ones included.
func (s *Server) listTokens(c *gin.Context) {
	u, err := s.loadUser(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	tokens, err := s.store.ListAPITokensByUser(c.Request.Context(), u.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	now := s.now()
	out := make([]tokenView, len(tokens))
	for i, t := range tokens {
		out[i] = newTokenView(t, now)
	}
	writeOK(c, out)
}

// revokeToken serves POST /admin/users/{user_id}/tokens/{token_id}/revoke. The token
// is refused from the next request on; a stream it holds ends at once.
func (s *Server) revokeToken(c *gin.Context) {
	u, err := s.loadUser(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	id := c.Param("token_id")
	if !isUUID(id) {
		s.fail(c, NotFound("token "+id))
		return
	}
	tok, err := s.store.RevokeUserAPIToken(c.Request.Context(), u.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		s.fail(c, NotFound("token "+id))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.tokens.flush() // refused from the next request on, here; elsewhere once announced
	writeOK(c, newTokenView(tok, s.now()))
}
