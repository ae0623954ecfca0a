package client

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// CreateSession starts a Session from an Agent. A non-empty idempotencyKey returns the
// same Session for the same user and Agent instead of a duplicate.
func (c *Client) CreateSession(ctx context.Context, agentID, idempotencyKey string) (CreatedSession, error) {
	var out CreatedSession
	err := c.do(ctx, "POST", "/agents/"+pathEscape(agentID)+"/conversations", nil, struct{}{}, &out, "Idempotency-Key", idempotencyKey)
	return out, err
}

// GetSession returns a Session's complete current details.
func (c *Client) GetSession(ctx context.Context, sessionID string) (Session, error) {
	var out Session
	err := c.do(ctx, "GET", "/sessions/"+pathEscape(sessionID), nil, nil, &out)
	return out, err
}

// ListOptions pages the conversation list.
type ListOptions struct {
	// Limit is the page size (1..100; 0 means the server's default).
	Limit int
	// Cursor continues from a page's NextCursor.
	Cursor string
	// Archived lists archived Sessions instead of active ones.
	Archived bool
}

// ListSessions returns one page of the caller's Sessions, newest activity first.
func (c *Client) ListSessions(ctx context.Context, opts ListOptions) (SessionPage, error) {
	q := url.Values{"page": {"1"}}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Archived {
		q.Set("archived", "true")
	}
	var out SessionPage
	err := c.do(ctx, "GET", "/sessions", q, nil, &out)
	return out, err
}

// SendInput sends a message and returns its receipt at once.
func (c *Client) SendInput(ctx context.Context, sessionID string, in Input) (Receipt, error) {
	var out Receipt
	err := c.do(ctx, "POST", "/sessions/"+pathEscape(sessionID)+"/inputs", nil, in, &out)
	return out, err
}

// Interrupt asks the Agent program to stop the response in progress. With no open
// response but held messages it is ErrPendingInputsNotCancelled, whose Data names them.
func (c *Client) Interrupt(ctx context.Context, sessionID string) (InterruptResult, error) {
	var out InterruptResult
	err := c.do(ctx, "POST", "/sessions/"+pathEscape(sessionID)+"/interrupt", nil, nil, &out)
	return out, err
}

// AnswerInteraction answers an approval or question; one no longer open is
// ErrInteractionNotOpen.
func (c *Client) AnswerInteraction(ctx context.Context, sessionID, interactionID string, a Answer) (Interaction, error) {
	var out Interaction
	body := map[string]any{"answer": a}
	err := c.do(ctx, "POST", "/sessions/"+pathEscape(sessionID)+"/interactions/"+pathEscape(interactionID)+"/answer", nil, body, &out)
	return out, err
}

// MessagesOptions pages the recorded conversation backwards.
type MessagesOptions struct {
	// Before continues from a page's Before.
	Before string
	// Limit is the page size (1..200; 0 means the server's default).
	Limit int
}

func (o MessagesOptions) query() url.Values {
	q := url.Values{}
	if o.Before != "" {
		q.Set("before", o.Before)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// Messages returns one page of the recorded conversation as UI messages.
func (c *Client) Messages(ctx context.Context, sessionID string, opts MessagesOptions) (MessagePage, error) {
	var out MessagePage
	err := c.do(ctx, "GET", "/sessions/"+pathEscape(sessionID)+"/messages", opts.query(), nil, &out)
	return out, err
}

// CreateShare creates a read-only share link of the caller's Session.
func (c *Client) CreateShare(ctx context.Context, sessionID string, expiresAt time.Time, allowDownload bool) (CreatedShare, error) {
	var out CreatedShare
	body := map[string]any{"expires_at": expiresAt.UTC().Format(time.RFC3339), "allow_download": allowDownload}
	err := c.do(ctx, "POST", "/sessions/"+pathEscape(sessionID)+"/shares", nil, body, &out)
	return out, err
}

// ListShares returns the Session's share links, without tokens.
func (c *Client) ListShares(ctx context.Context, sessionID string) ([]Share, error) {
	var out []Share
	err := c.do(ctx, "GET", "/sessions/"+pathEscape(sessionID)+"/shares", nil, nil, &out)
	return out, err
}

// RevokeShare revokes a share link.
func (c *Client) RevokeShare(ctx context.Context, sessionID, shareID string) (Share, error) {
	var out Share
	err := c.do(ctx, "POST", "/sessions/"+pathEscape(sessionID)+"/shares/"+pathEscape(shareID)+"/revoke", nil, nil, &out)
	return out, err
}

// SharedSession reads the Session a share link opens, as its viewer (no account).
func (c *Client) SharedSession(ctx context.Context, shareToken string) (SharedSession, error) {
	var out SharedSession
	err := c.do(ctx, "GET", "/shared/"+pathEscape(shareToken), nil, nil, &out)
	return out, err
}

// SharedMessages reads one page of a shared Session's messages, as its viewer.
func (c *Client) SharedMessages(ctx context.Context, shareToken string, opts MessagesOptions) (MessagePage, error) {
	var out MessagePage
	err := c.do(ctx, "GET", "/shared/"+pathEscape(shareToken)+"/messages", opts.query(), nil, &out)
	return out, err
}
