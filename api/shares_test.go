package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// openShareStream starts a viewer's stream request, without any token.
func (f *fixture) openShareStream(ctx context.Context, token, query string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/v1/shared/"+token+"/stream"+query, nil)
	require.NoError(f.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// logText flattens every log entry, fields included, for searching.
func logText(t testing.TB, logs *observer.ObservedLogs) string {
	var all bytes.Buffer
	for _, e := range logs.All() {
		all.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			all.WriteString(k)
			all.WriteString(mustJSON(t, v))
		}
	}
	return all.String()
}

func TestShareLinkViewerReadsButNeverWrites(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	var mu sync.Mutex
	now := time.Now()
	f := newFixture(t, func(o *Options) {
		o.Logger = zap.New(core)
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		o.TokenRecheck = 50 * time.Millisecond
	})
	id := f.newSession(f.member)
	f.call("POST", "/api/v1/admin/sessions/"+id+"/history-import", f.admin, importBody(importUser, importReply)).ok(t)
	r := f.relay(id)
	first := r.append("r-1", textResponse("r-1", "Shared answer", engines.OutcomeCompleted)...)
	f.exec(`INSERT INTO responses (session_id, response_id, origin, input_ids, started_seq, started_at, outcome, ended_seq, ended_at)
		VALUES ($1, 'r-1', 'input', '[]', 1, clock_timestamp(), 'completed', $2, clock_timestamp())`, id, first)
	r.append("r-2", textResponse("r-2", "Second answer", engines.OutcomeCompleted)...)

	// Only the owner shares.
	expiry := now.Add(time.Hour).UTC().Truncate(time.Second)
	body := map[string]any{"expires_at": expiry.Format(time.RFC3339)}
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.other, body).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.admin, body).refused(t, http.StatusForbidden, CodeForbidden)
	var link createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, body).ok(t).into(t, &link)
	require.True(t, strings.HasPrefix(link.Token, "abs_"))
	require.GreaterOrEqual(t, len(link.Token), 40, "256 random bits")
	require.Equal(t, "/api/v1/shared/"+link.Token, link.Path)
	require.False(t, link.AllowDownload, "downloads are off unless asked for")
	require.Equal(t, shareActive, link.State)
	require.True(t, expiry.Equal(link.ExpiresAt))
	var stored []byte
	require.NoError(t, f.db.QueryRow(f.ctx, "SELECT token_hash FROM session_shares WHERE id = $1", link.ShareID).Scan(&stored))
	require.Equal(t, store.HashAPIToken(link.Token), stored, "only the hash is stored")

	// The viewer reads, without an account.
	var shared sharedSession
	f.call("GET", link.Path, "", nil).ok(t).into(t, &shared)
	require.Equal(t, id, shared.Session.SessionID)
	require.False(t, shared.Share.AllowDownload)
	var page messagePage
	f.call("GET", link.Path+"/messages", "", nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 3, "imported messages share like any other")
	require.Equal(t, "import:m-1", page.Messages[0].ID)
	require.Equal(t, "r-1", page.Messages[2].ID)
	f.call("GET", link.Path+"/history-blocks", "", nil).ok(t)
	f.call("GET", link.Path+"/messages?limit=1", "", nil).ok(t).into(t, &page)
	require.NotNil(t, page.Before)
	f.call("GET", link.Path+"/messages?before="+*page.Before, "", nil).ok(t)

	// The stream resumes by seq like the owner's.
	resp := f.openShareStream(f.ctx, link.Token, "?after_seq=0")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	streamed, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	checkStream(t, streamed, 0)
	require.Equal(t, "r-1", validateSSE(t, streamed).Messages[0].ID)
	streamed, err = io.ReadAll(f.openShareStream(f.ctx, link.Token, "?after_seq="+itoa(first)).Body)
	require.NoError(t, err)
	checkStream(t, streamed, first)
	require.Equal(t, "r-2", validateSSE(t, streamed).Messages[0].ID)

	// Every write is refused, and the link is no API token.
	for _, w := range []struct{ method, path string }{
		{"POST", link.Path + "/inputs"},
		{"PATCH", link.Path},
		{"DELETE", link.Path},
		{"POST", link.Path + "/messages"},
		{"POST", link.Path + "/interrupt"},
		{"POST", link.Path + "/archive"},
	} {
		f.call(w.method, w.path, "", map[string]any{"content": "hi"}).refused(t, http.StatusForbidden, CodeForbidden, "only reads")
	}
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", link.Token, map[string]any{"content": "hi"}).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", "/api/v1/sessions/"+id, link.Token, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", link.Path+"/child-runs", "", nil).refused(t, http.StatusNotFound, CodeNotFound)
	var count int
	require.NoError(t, f.db.QueryRow(f.ctx, "SELECT count(*) FROM inputs WHERE session_id = $1", id).Scan(&count))
	require.Zero(t, count, "no viewer's write reached the Session")

	var shares []shareView
	f.call("GET", "/api/v1/sessions/"+id+"/shares", f.member, nil).ok(t).into(t, &shares)
	require.Len(t, shares, 1)
	require.NotContains(t, mustJSON(t, shares), link.Token, "a list never shows a token")
	f.call("GET", "/api/v1/sessions/"+id+"/shares", f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)

	// Revoking ends an open stream at its re-check, and the link is 404 from then on.
	live := f.openShareStream(f.ctx, link.Token, "?after_seq="+itoa(r.append("r-3", textResponse("r-3", "x", engines.OutcomeCompleted)[:2]...)))
	require.Equal(t, http.StatusOK, live.StatusCode)
	var revoked shareView
	f.call("POST", "/api/v1/sessions/"+id+"/shares/"+link.ShareID+"/revoke", f.member, nil).ok(t).into(t, &revoked)
	require.Equal(t, shareRevoked, revoked.State)
	rest, err := io.ReadAll(live.Body)
	require.NoError(t, err)
	require.NotContains(t, string(rest), "[DONE]", "a revoked link's stream ends without finishing")
	for _, p := range []string{link.Path, link.Path + "/messages", link.Path + "/history-blocks", link.Path + "/stream"} {
		f.call("GET", p, "", nil).refused(t, http.StatusNotFound, CodeNotFound, "share link")
	}
	f.call("POST", "/api/v1/sessions/"+id+"/shares/00000000-0000-0000-0000-000000000000/revoke", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)

	// An expired link is 404.
	var short createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, map[string]any{"expires_at": now.Add(time.Minute).Format(time.RFC3339), "allow_download": true}).ok(t).into(t, &short)
	require.True(t, short.AllowDownload)
	f.call("GET", short.Path+"/messages", "", nil).ok(t)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	f.call("GET", short.Path+"/messages", "", nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/shared/abs_unknown/messages", "", nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/shared/"+link.Token+"/unknown", "", nil).refused(t, http.StatusNotFound, CodeNotFound)

	// A disabled owner's links stop; a deleted Session's links are gone.
	var third createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, body).ok(t).into(t, &third)
	f.call("GET", third.Path, "", nil).ok(t)
	f.call("POST", "/api/v1/admin/users/"+f.memberID+"/disable", f.admin, nil).ok(t)
	f.call("GET", third.Path, "", nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", "/api/v1/admin/users/"+f.memberID+"/enable", f.admin, nil).ok(t)
	f.call("GET", third.Path, "", nil).ok(t)
	f.activate(id)
	f.call("DELETE", "/api/v1/sessions/"+id, f.member, nil).ok(t)
	f.call("GET", third.Path, "", nil).refused(t, http.StatusNotFound, CodeNotFound)

	for _, token := range []string{link.Token, short.Token, third.Token} {
		require.NotContains(t, logText(t, logs), token, "a link token never reaches the logs")
	}
}

func TestShareLinksRefuseBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/shares"
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "expires_at"},
		{map[string]any{"expires_at": "soon"}, "expires_at"},
		{map[string]any{"expires_at": time.Now().Add(-time.Hour).Format(time.RFC3339)}, "expires_at"},
		{map[string]any{"expires_at": time.Now().Add(time.Hour).Format(time.RFC3339), "allow_download": "yes"}, "allow_download"},
		{map[string]any{"expires_at": time.Now().Add(time.Hour).Format(time.RFC3339), "viewers": 3}, "viewers"},
	} {
		f.call("POST", path, f.member, tc.body).refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
	}
	f.call("POST", path+"/not-a-uuid/revoke", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
	var shares []shareView
	f.call("GET", path, f.member, nil).ok(t).into(t, &shares)
	require.Empty(t, shares, "no refused request made a link")
}

// TestWorkspaceDownloadFollowsTheLinkFlag checks the helper workspace file routes call:
// the owner may download, a viewer only with a link that allows it.
func TestWorkspaceDownloadFollowsTheLinkFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	s := New(f.opts)
	download := func(c *gin.Context) {
		sess, err := s.loadSessionForDownload(c)
		if err != nil {
			s.fail(c, err)
			return
		}
		writeOK(c, sess.ID)
	}
	s.engine.GET("/api/v1/shared/:share_token/test-download", s.authenticateShare, download)
	s.engine.GET("/api/v1/sessions/:session_id/test-download", s.authenticate, download)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	get := func(path, token string) int {
		req, err := http.NewRequestWithContext(f.ctx, "GET", srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	expiry := time.Now().Add(time.Hour).Format(time.RFC3339)
	var allowed, denied createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, map[string]any{"expires_at": expiry, "allow_download": true}).ok(t).into(t, &allowed)
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, map[string]any{"expires_at": expiry}).ok(t).into(t, &denied)

	assert.Equal(t, http.StatusOK, get("/api/v1/sessions/"+id+"/test-download", f.member))
	assert.Equal(t, http.StatusNotFound, get("/api/v1/sessions/"+id+"/test-download", f.other))
	assert.Equal(t, http.StatusOK, get(allowed.Path+"/test-download", ""))
	assert.Equal(t, http.StatusForbidden, get(denied.Path+"/test-download", ""))
}
