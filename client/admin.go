package client

import (
	"context"
	"time"
)

// Me returns the caller and the token the request used.
func (c *Client) Me(ctx context.Context) (Me, error) {
	var out Me
	err := c.do(ctx, "GET", "/me", nil, nil, &out)
	return out, err
}

// CreateUser creates a user (administrators only).
func (c *Client) CreateUser(ctx context.Context, u NewUser) (User, error) {
	var out User
	err := c.do(ctx, "POST", "/admin/users", nil, u, &out)
	return out, err
}

// ListUsers lists every user, oldest first (administrators only).
func (c *Client) ListUsers(ctx context.Context) ([]User, error) {
	var out []User
	err := c.do(ctx, "GET", "/admin/users", nil, nil, &out)
	return out, err
}

// GetUser returns one user (administrators only).
func (c *Client) GetUser(ctx context.Context, userID string) (User, error) {
	var out User
	err := c.do(ctx, "GET", "/admin/users/"+pathEscape(userID), nil, nil, &out)
	return out, err
}

// DisableUser disables a user: their tokens stop working at once.
func (c *Client) DisableUser(ctx context.Context, userID string) (User, error) {
	var out User
	err := c.do(ctx, "POST", "/admin/users/"+pathEscape(userID)+"/disable", nil, nil, &out)
	return out, err
}

// EnableUser enables a disabled user again.
func (c *Client) EnableUser(ctx context.Context, userID string) (User, error) {
	var out User
	err := c.do(ctx, "POST", "/admin/users/"+pathEscape(userID)+"/enable", nil, nil, &out)
	return out, err
}

// IssueToken issues an API token for a user; a nil expiresAt never expires. The
// answer's Secret is shown this once.
func (c *Client) IssueToken(ctx context.Context, userID, name string, expiresAt *time.Time) (IssuedToken, error) {
	body := map[string]any{"name": name}
	if expiresAt != nil {
		body["expires_at"] = expiresAt.UTC().Format(time.RFC3339)
	}
	var out IssuedToken
	err := c.do(ctx, "POST", "/admin/users/"+pathEscape(userID)+"/tokens", nil, body, &out)
	return out, err
}

// ListTokens lists a user's tokens, without secrets.
func (c *Client) ListTokens(ctx context.Context, userID string) ([]Token, error) {
	var out []Token
	err := c.do(ctx, "GET", "/admin/users/"+pathEscape(userID)+"/tokens", nil, nil, &out)
	return out, err
}

// RevokeToken revokes one of a user's tokens.
func (c *Client) RevokeToken(ctx context.Context, userID, tokenID string) (Token, error) {
	var out Token
	err := c.do(ctx, "POST", "/admin/users/"+pathEscape(userID)+"/tokens/"+pathEscape(tokenID)+"/revoke", nil, nil, &out)
	return out, err
}
