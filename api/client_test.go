package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/engines"
)

// These tests drive the API through package client, against a real PostgreSQL: the
// client's types must decode what the handlers write, and its errors must carry the
// envelope's codes.

func (f *fixture) client(token string, opts ...client.Option) *client.Client {
	f.t.Helper()
	c, err := client.New(f.srv.URL, token, opts...)
	require.NoError(f.t, err)
	return c
}

func TestGoClientTypedRequestsAndErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := f.ctx
	member := f.client(f.member)

	created, err := member.CreateSession(ctx, f.agent.ID, "client-key")
	require.NoError(t, err)
	again, err := member.CreateSession(ctx, f.agent.ID, "client-key")
	require.NoError(t, err)
	require.Equal(t, created.SessionID, again.SessionID, "the Idempotency-Key header is sent")
	f.activate(created.SessionID)

	id := "m-1"
	receipt, err := member.SendInput(ctx, created.SessionID, client.Input{Content: "hello", ClientMessageID: &id})
	require.NoError(t, err)
	require.False(t, receipt.Duplicate)
	dup, err := member.SendInput(ctx, created.SessionID, client.Input{Content: "hello", ClientMessageID: &id})
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, receipt.InputID, dup.InputID)

	sess, err := member.GetSession(ctx, created.SessionID)
	require.NoError(t, err)
	require.Equal(t, "PROCESSING", sess.State)
	require.Len(t, sess.HeldInputs, 1)
	page, err := member.ListSessions(ctx, client.ListOptions{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Sessions, 1)
	require.Equal(t, created.SessionID, page.Sessions[0].SessionID)

	// Errors carry the envelope: errors.Is matches the code, Data and Status come along.
	_, err = member.Interrupt(ctx, created.SessionID)
	require.ErrorIs(t, err, client.ErrPendingInputsNotCancelled)
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusConflict, apiErr.Status)
	require.Contains(t, string(apiErr.Data), receipt.InputID)
	require.NotEmpty(t, apiErr.RequestID)
	_, err = f.client(f.other).GetSession(ctx, created.SessionID)
	require.ErrorIs(t, err, client.ErrNotFound)
	_, err = member.SendInput(ctx, created.SessionID, client.Input{})
	require.ErrorIs(t, err, client.ErrInvalidRequest)
	_, err = member.AnswerInteraction(ctx, created.SessionID, "no-such-interaction", client.Answer{Decision: "approve"})
	require.Error(t, err)
	_, err = f.client("abx_nothing").Me(ctx)
	require.ErrorIs(t, err, client.ErrUnauthorized)
	require.False(t, errors.Is(err, client.ErrNotFound))
	_, err = client.New("localhost:8080", "x")
	require.Error(t, err, "a service URL needs its scheme")

	// Administration through the client.
	admin := f.client(f.admin)
	u, err := admin.CreateUser(ctx, client.NewUser{Email: "client@example.test"})
	require.NoError(t, err)
	expiry := time.Now().Add(time.Hour)
	tok, err := admin.IssueToken(ctx, u.UserID, "client", &expiry)
	require.NoError(t, err)
	me, err := f.client(tok.Secret).Me(ctx)
	require.NoError(t, err)
	require.Equal(t, "client@example.test", me.User.Email)
	tokens, err := admin.ListTokens(ctx, u.UserID)
	require.NoError(t, err)
	require.Len(t, tokens, 1)
	_, err = admin.RevokeToken(ctx, u.UserID, tok.TokenID)
	require.NoError(t, err)
	_, err = f.client(tok.Secret).Me(ctx)
	require.ErrorIs(t, err, client.ErrUnauthorized)
	_, err = member.CreateUser(ctx, client.NewUser{Email: "x@example.test"})
	require.ErrorIs(t, err, client.ErrForbidden)

	// Share links, and a viewer client without a token.
	link, err := member.CreateShare(ctx, created.SessionID, time.Now().Add(time.Hour), false)
	require.NoError(t, err)
	viewer := f.client("")
	shared, err := viewer.SharedSession(ctx, link.Token)
	require.NoError(t, err)
	require.Equal(t, created.SessionID, shared.Session.SessionID)
	msgs, err := viewer.SharedMessages(ctx, link.Token, client.MessagesOptions{})
	require.NoError(t, err)
	require.Len(t, msgs.Messages, 1)
	_, err = member.RevokeShare(ctx, created.SessionID, link.ShareID)
	require.NoError(t, err)
	_, err = viewer.SharedSession(ctx, link.Token)
	require.ErrorIs(t, err, client.ErrNotFound)
}

// cuttingProxy forwards to the API but cuts the first stream connection after it has
// forwarded cutAfter bytes, as a dropped connection does.
type cuttingProxy struct {
	t        testing.TB
	upstream string
	cutAfter int
	mu       sync.Mutex
	streams  []string // the query of each stream request
}

func (p *cuttingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	cut := false
	if strings.HasSuffix(r.URL.Path, "/stream") {
		p.mu.Lock()
		p.streams = append(p.streams, r.URL.RawQuery)
		cut = len(p.streams) == 1
		p.mu.Unlock()
	}
	if !cut {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_, _ = io.CopyN(w, resp.Body, int64(p.cutAfter))
	w.(http.Flusher).Flush()
	// Aborting the handler closes the connection mid-stream.
	panic(http.ErrAbortHandler)
}

func TestGoClientStreamResumesFromTheLastSeq(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	frames := textResponse("r-1", "one two three four five six seven", engines.OutcomeCompleted)
	last := r.append("r-1", frames...)
	r.append("r-2", textResponse("r-2", "next", engines.OutcomeCompleted)...)

	// Cut inside the fourth part's cursor: three parts arrived whole, the fourth
	// without the cursor that confirms it, so the client asks again after seq 3.
	full, err := io.ReadAll(f.openStream(f.ctx, id, "?after_seq=0", f.member).Body)
	require.NoError(t, err)
	events := strings.SplitAfter(string(full), "\n\n")
	cutAfter := len(strings.Join(events[:7], "")) + 10
	proxy := &cuttingProxy{t: t, upstream: f.srv.URL, cutAfter: cutAfter}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	c, err := client.New(ps.URL, f.member, client.WithStreamRetries(3, time.Millisecond))
	require.NoError(t, err)

	var got []client.Part
	for p, err := range c.Stream(f.ctx, id, 0) {
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Len(t, got, int(last), "every part of the response once, none repeated")
	for i, p := range got {
		require.Equal(t, int64(i+1), p.Seq)
		var part map[string]any
		require.NoError(t, json.Unmarshal(p.Raw, &part))
		require.Equal(t, p.Type, part["type"])
	}
	require.Equal(t, "finish", got[len(got)-1].Type)
	proxy.mu.Lock()
	assert.Equal(t, []string{"after_seq=0", "after_seq=3"}, proxy.streams, "the second request resumed after the last seq")
	proxy.mu.Unlock()

	// Follow continues into the next response from the last seq.
	var next []client.Part
	for p, err := range c.Follow(f.ctx, id, last) {
		require.NoError(t, err)
		next = append(next, p)
		if p.Type == "finish" {
			break
		}
	}
	require.Equal(t, last+1, next[0].Seq)

	// A refusal is not retried: it ends the iteration with the envelope's error.
	var errs []error
	for _, err := range f.client(f.other).Stream(f.ctx, id, 0) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], client.ErrNotFound)
}

// keepAliveProxy forwards to the API, flushing as it reads, and closes sawKeepAlive
// once a keep-alive comment went through.
type keepAliveProxy struct {
	upstream     string
	once         sync.Once
	sawKeepAlive chan struct{}
}

func (p *keepAliveProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			w.(http.Flusher).Flush()
			if strings.Contains(string(buf[:n]), ": keep-alive") {
				p.once.Do(func() { close(p.sawKeepAlive) })
			}
		}
		if err != nil {
			return
		}
	}
}

func TestGoClientStreamSkipsKeepAlives(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.KeepAlive = 10 * time.Millisecond })
	id := f.newSession(f.member)
	proxy := &keepAliveProxy{upstream: f.srv.URL, sawKeepAlive: make(chan struct{})}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	c, err := client.New(ps.URL, f.member)
	require.NoError(t, err)

	type result struct {
		parts []client.Part
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		for p, err := range c.Stream(f.ctx, id, 0) {
			if err != nil {
				res.err = err
				break
			}
			res.parts = append(res.parts, p)
		}
		done <- res
	}()
	select {
	case <-proxy.sawKeepAlive:
	case <-f.ctx.Done():
		t.Fatal("no keep-alive went through")
	}
	r := f.relay(id)
	last := r.append("r-1", textResponse("r-1", "after a quiet while", engines.OutcomeCompleted)...)
	res := <-done
	require.NoError(t, res.err)
	require.Len(t, res.parts, int(last))
	require.Equal(t, "finish", res.parts[len(res.parts)-1].Type)
}
