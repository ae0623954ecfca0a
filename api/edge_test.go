package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
)

// slowBodyRequest opens a connection and sends a request's headers announcing a large
// body, then a first byte of it, and nothing more.
func slowBodyRequest(t *testing.T, addr, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	head := "POST /api/v1/agents HTTP/1.1\r\nHost: astrabox\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	_, err = io.WriteString(conn, head+"\r\n{")
	require.NoError(t, err)
	return conn
}

// readAnswerAndClose reads the answer's status on conn before deadline and checks
// that the server then closed the connection.
func readAnswerAndClose(conn net.Conn, deadline time.Time) (int, error) {
	if err := conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, fmt.Errorf("no answer before the deadline: %w", err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("read the answer: %w", err)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("the server did not close the connection: %v", err)
	}
	return resp.StatusCode, nil
}

// TestSlowBodiesWithoutATokenAreRefusedAtOnce: connections trickling a body without a
// valid token get 401 before their body is read, and are closed, long before the
// read timeout.
func TestSlowBodiesWithoutATokenAreRefusedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	addr := f.serve(func(o *Options) { o.ReadTimeout = time.Minute })
	const conns = 50
	opened := make([]net.Conn, conns)
	for i := range opened {
		token := ""
		if i%2 == 1 {
			token = "abx_unknown"
		}
		opened[i] = slowBodyRequest(t, addr, token)
	}
	deadline := time.Now().Add(10 * time.Second)
	statuses := make([]int, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i, conn := range opened {
		wg.Go(func() { statuses[i], errs[i] = readAnswerAndClose(conn, deadline) })
	}
	wg.Wait()
	for i := range opened {
		require.NoError(t, errs[i], "connection %d", i)
		assert.Equal(t, http.StatusUnauthorized, statuses[i], "connection %d", i)
	}
}

// TestSlowBodyWithATokenIsCutAtTheReadTimeout: an authenticated client trickling its
// body gets 408 at the read timeout, and its connection is closed.
func TestSlowBodyWithATokenIsCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const readTimeout = time.Second
	addr := f.serve(func(o *Options) { o.ReadTimeout = readTimeout })
	start := time.Now()
	conn := slowBodyRequest(t, addr, f.member)
	status, err := readAnswerAndClose(conn, start.Add(readTimeout+10*time.Second))
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestTimeout, status)
	assert.GreaterOrEqual(t, time.Since(start), readTimeout)
}

// TestBodiesAreCappedByConfiguration: a body beyond http.max_body_bytes is 413.
func TestBodiesAreCappedByConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	addr := f.serve(func(o *Options) { o.MaxBodyBytes = 1024 })
	body := `{"name":"big","runtime_profile_id":"` + f.profile.ID + `","description":"` + strings.Repeat("x", 2048) + `"}`
	req, err := http.NewRequestWithContext(f.ctx, "POST", "http://"+addr+"/api/v1/agents", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.member)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// TestStreamsOutliveTheReadTimeout: a stream lifts the read timeout once its request is
// read, so it is still open (sending keep-alives) after the timeout.
func TestStreamsOutliveTheReadTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	const readTimeout = 300 * time.Millisecond
	addr := f.serve(func(o *Options) { o.ReadTimeout = readTimeout; o.KeepAlive = 3 * readTimeout })
	ctx := testutil.ContextWithTimeout(t, 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.member)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err, "the stream ended before its first keep-alive")
	assert.Equal(t, ": keep-alive\n", line)
}

// TestStreamsPerTokenAreCapped: a token holds at most MaxStreamsPerToken open streams;
// one more is 429 TOO_MANY_STREAMS, other tokens are unaffected, and closing a stream
// frees its slot.
func TestStreamsPerTokenAreCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.MaxStreamsPerToken = 2 })
	id := f.newSession(f.member)
	first, cancelFirst := context.WithCancel(f.ctx)
	r1 := f.openStream(first, id, "", f.member)
	r2 := f.openStream(f.ctx, id, "", f.member)
	require.Equal(t, http.StatusOK, r1.StatusCode)
	require.Equal(t, http.StatusOK, r2.StatusCode)
	f.call("GET", "/api/v1/sessions/"+id+"/stream", f.member, nil).refused(t, http.StatusTooManyRequests, CodeTooManyStreams)
	r3 := f.openStream(f.ctx, id, "", f.admin)
	assert.Equal(t, http.StatusOK, r3.StatusCode, "another token has its own slots")

	cancelFirst()
	r1.Body.Close()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/v1/sessions/"+id+"/stream", nil)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+f.member)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "a closed stream frees its slot")
}

// TestStreamEndsWhenItsTokenIsRevoked: an open stream re-checks its token and ends
// once the token is revoked; reconnecting is then 401, whether the revocation was
// announced or not (a row edited by hand announces nothing: the stream's re-check
// finds the token gone and empties the token cache, which held it).
func TestStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	t.Parallel()
	for name, revoke := range map[string]func(f *fixture, tokenID string) error{
		"announced": func(f *fixture, tokenID string) error { return f.st.RevokeAPIToken(f.ctx, tokenID) },
		"by hand": func(f *fixture, tokenID string) error {
			_, err := f.db.Exec(f.ctx, "UPDATE api_tokens SET revoked_at = now() WHERE id = $1", tokenID)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(o *Options) { o.TokenRecheck = 50 * time.Millisecond })
			id := f.newSession(f.member)
			tok, plain, err := f.st.CreateAPIToken(f.ctx, f.memberID, "revoked-while-streaming", nil)
			require.NoError(t, err)
			ctx := testutil.ContextWithTimeout(t, 20*time.Second)
			resp := f.openStream(ctx, id, "", plain)
			require.Equal(t, http.StatusOK, resp.StatusCode, "the token is now cached")

			require.NoError(t, revoke(f, tok.ID))
			_, err = io.ReadAll(resp.Body)
			require.NoError(t, err, "the stream ends once the token is revoked")
			require.NoError(t, ctx.Err())
			f.call("GET", "/api/v1/sessions/"+id+"/stream", plain, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
		})
	}
}

// TestTokenLastUsedIsRecordedAtMostOncePerMinute: each use of a token updates its
// last_used_at unless it was updated less than a minute ago.
func TestTokenLastUsedIsRecordedAtMostOncePerMinute(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFixture(t, func(o *Options) {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	lastUsed := func() *time.Time {
		var at *time.Time
		require.NoError(t, f.db.QueryRow(f.ctx, "SELECT last_used_at FROM api_tokens WHERE user_id = $1", f.memberID).Scan(&at))
		return at
	}
	require.Nil(t, lastUsed())
	first := now
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t)
	require.NotNil(t, lastUsed())
	assert.True(t, first.Equal(*lastUsed()))

	advance(30 * time.Second)
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t)
	assert.True(t, first.Equal(*lastUsed()), "not written again within the minute")

	advance(31 * time.Second)
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t)
	assert.True(t, now.Equal(*lastUsed()))
}
