package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// TestUsersAndTokensLifecycle walks an administrator through creating a user, issuing
// them a token, the user reading /me with it, revoking it, and disabling the user,
// whose every token stops at once.
func TestUsersAndTokensLifecycle(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	var mu sync.Mutex
	now := time.Now()
	f := newFixture(t, func(o *Options) {
		o.Logger = zap.New(core)
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})

	var created userView
	f.call("POST", "/api/v1/admin/users", f.admin, map[string]any{"email": " Second@Example.test ", "display_name": "Second"}).ok(t).into(t, &created)
	require.Equal(t, "Second@Example.test", created.Email)
	require.Equal(t, store.RoleMember, created.Role, "member by default")
	require.False(t, created.Disabled)

	f.call("POST", "/api/v1/admin/users", f.admin, map[string]any{"email": "second@example.TEST"}).
		refused(t, http.StatusConflict, CodeConflict, "already exists")
	f.call("POST", "/api/v1/admin/users", f.member, map[string]any{"email": "x@example.test"}).
		refused(t, http.StatusForbidden, CodeForbidden)

	expiry := now.Add(time.Hour).UTC().Truncate(time.Second)
	var issued issuedToken
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin,
		map[string]any{"name": "laptop", "expires_at": expiry.Format(time.RFC3339)}).ok(t).into(t, &issued)
	require.True(t, strings.HasPrefix(issued.Secret, issued.Prefix))
	require.Equal(t, "laptop", issued.Name)
	require.Equal(t, tokenActive, issued.State)
	require.True(t, expiry.Equal(*issued.ExpiresAt))
	var stored []byte
	require.NoError(t, f.db.QueryRow(f.ctx, "SELECT token_hash FROM api_tokens WHERE id = $1", issued.TokenID).Scan(&stored))
	require.Equal(t, store.HashAPIToken(issued.Secret), stored, "only the hash is stored")

	var me meView
	f.call("GET", "/api/v1/me", issued.Secret, nil).ok(t).into(t, &me)
	require.Equal(t, created.UserID, me.User.UserID)
	require.Equal(t, issued.TokenID, me.Token.TokenID)
	require.Equal(t, "laptop", me.Token.Name)

	// The new user is a member like any other: they create and own Sessions.
	sessionID := f.newSession(issued.Secret)
	f.call("GET", "/api/v1/sessions/"+sessionID, f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)

	var listed []tokenView
	f.call("GET", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin, nil).ok(t).into(t, &listed)
	require.Len(t, listed, 1)
	require.Equal(t, issued.TokenID, listed[0].TokenID)
	require.NotContains(t, mustJSON(t, listed), issued.Secret, "a list never shows a secret")

	// The token expires at its time.
	mu.Lock()
	now = expiry
	mu.Unlock()
	f.call("GET", "/api/v1/me", issued.Secret, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin, nil).ok(t).into(t, &listed)
	require.Equal(t, tokenExpired, listed[0].State)

	var second issuedToken
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin, map[string]any{"name": "ci"}).ok(t).into(t, &second)
	require.Nil(t, second.ExpiresAt, "no expiry: never expires")
	f.call("GET", "/api/v1/me", second.Secret, nil).ok(t)

	var revoked tokenView
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/tokens/"+second.TokenID+"/revoke", f.admin, nil).ok(t).into(t, &revoked)
	require.Equal(t, tokenRevoked, revoked.State)
	f.call("GET", "/api/v1/me", second.Secret, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("POST", "/api/v1/admin/users/"+f.adminID+"/tokens/"+second.TokenID+"/revoke", f.admin, nil).
		refused(t, http.StatusNotFound, CodeNotFound, "token")

	// Disabling the user stops every token of theirs at once; enabling restores them.
	var third issuedToken
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin, map[string]any{"name": "third"}).ok(t).into(t, &third)
	f.call("GET", "/api/v1/sessions/"+sessionID, third.Secret, nil).ok(t)
	var disabled userView
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/disable", f.admin, nil).ok(t).into(t, &disabled)
	require.True(t, disabled.Disabled)
	require.NotNil(t, disabled.DisabledAt)
	f.call("GET", "/api/v1/sessions/"+sessionID, third.Secret, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/tokens", f.admin, map[string]any{"name": "more"}).
		refused(t, http.StatusConflict, CodeConflict, "disabled")
	f.call("POST", "/api/v1/admin/users/"+created.UserID+"/enable", f.admin, nil).ok(t)
	f.call("GET", "/api/v1/sessions/"+sessionID, third.Secret, nil).ok(t)

	f.call("POST", "/api/v1/admin/users/"+f.adminID+"/disable", f.admin, nil).refused(t, http.StatusConflict, CodeConflict, "your own")

	var users []userView
	f.call("GET", "/api/v1/admin/users", f.admin, nil).ok(t).into(t, &users)
	require.Len(t, users, 4)

	// No secret reaches a log line.
	var all bytes.Buffer
	for _, e := range logs.All() {
		all.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			all.WriteString(k)
			all.WriteString(mustJSON(t, v))
		}
	}
	for _, secret := range []string{issued.Secret, second.Secret, third.Secret} {
		require.NotContains(t, all.String(), secret)
	}
}

func TestUsersAndTokensRefuseBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "email"},
		{map[string]any{"email": "no-at-sign"}, "email"},
		{map[string]any{"email": "a b@example.test"}, "email"},
		{map[string]any{"email": "a@example.test", "role": "owner"}, "role"},
		{map[string]any{"email": "a@example.test", "display_name": "two\nlines"}, "display_name"},
		{map[string]any{"email": "a@example.test", "extra": 1}, "extra"},
	} {
		f.call("POST", "/api/v1/admin/users", f.admin, tc.body).refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
	}
	tokens := "/api/v1/admin/users/" + f.memberID + "/tokens"
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "name"},
		{map[string]any{"name": strings.Repeat("n", maxTokenNameLen+1)}, "name"},
		{map[string]any{"name": "x", "expires_at": "tomorrow"}, "expires_at"},
		{map[string]any{"name": "x", "expires_at": "2026-01-01T00:00:00"}, "expires_at"},
		{map[string]any{"name": "x", "expires_at": time.Now().Add(-time.Minute).Format(time.RFC3339)}, "expires_at"},
	} {
		f.call("POST", tokens, f.admin, tc.body).refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
	}
	f.call("GET", "/api/v1/admin/users/not-a-uuid", f.admin, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/admin/users/00000000-0000-0000-0000-000000000000/tokens", f.admin, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", tokens, f.member, nil).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("POST", tokens+"/not-a-uuid/revoke", f.admin, nil).refused(t, http.StatusNotFound, CodeNotFound)

	var listed []tokenView
	f.call("GET", tokens, f.admin, nil).ok(t).into(t, &listed)
	require.Len(t, listed, 1, "no refused request issued a token")
	var count int
	require.NoError(t, f.db.QueryRow(f.ctx, "SELECT count(*) FROM users").Scan(&count))
	require.Equal(t, 3, count, "no refused request created a user")
}

// TestRevocationEndsOpenStreamsAtOnce keeps the periodic re-check at an hour: a stream
// that ends within the test's deadline ended because the revocation was announced.
func TestRevocationEndsOpenStreamsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.TokenRecheck = time.Hour })
	id := f.newSession(f.member)
	expiry := time.Now().Add(time.Hour).Format(time.RFC3339)

	var tok issuedToken
	f.call("POST", "/api/v1/admin/users/"+f.memberID+"/tokens", f.admin, map[string]any{"name": "stream"}).ok(t).into(t, &tok)
	var link createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, map[string]any{"expires_at": expiry}).ok(t).into(t, &link)
	var other createdShare
	f.call("POST", "/api/v1/sessions/"+id+"/shares", f.member, map[string]any{"expires_at": expiry}).ok(t).into(t, &other)

	ended := func(resp *http.Response) {
		t.Helper()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		ctx := testutil.ContextWithTimeout(t, 20*time.Second)
		done := make(chan error, 1)
		go func() { _, err := io.ReadAll(resp.Body); done <- err }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("the stream did not end after its credential was revoked")
		}
	}

	byToken := f.openStream(f.ctx, id, "", tok.Secret)
	byLink := f.openShareStream(f.ctx, link.Token, "")
	byOtherLink := f.openShareStream(f.ctx, other.Token, "")
	f.call("POST", "/api/v1/admin/users/"+f.memberID+"/tokens/"+tok.TokenID+"/revoke", f.admin, nil).ok(t)
	ended(byToken)
	f.call("POST", "/api/v1/sessions/"+id+"/shares/"+link.ShareID+"/revoke", f.member, nil).ok(t)
	ended(byLink)

	byMember := f.openStream(f.ctx, id, "", f.member)
	f.call("POST", "/api/v1/admin/users/"+f.memberID+"/disable", f.admin, nil).ok(t)
	ended(byMember)
	ended(byOtherLink)
}

// TestACachedTokenIsReadAgainAfterItsTimeOrARevocationsAnnouncement: an authenticated
// token is served from the cache while its row changes unannounced (an edit by hand),
// is read again once its cache time has passed, and is dropped from the cache as soon
// as a revocation is announced on credentials_revoked, as another API replica's
// revocation is.
func TestACachedTokenIsReadAgainAfterItsTimeOrARevocationsAnnouncement(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	f := newFixture(t, func(o *Options) {
		o.TokenCacheTTL = time.Minute
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	revokeUnannounced := func(userID string) {
		f.exec("UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1", userID)
	}

	f.call("GET", "/api/v1/me", f.member, nil).ok(t)
	revokeUnannounced(f.memberID)
	f.call("GET", "/api/v1/me", f.member, nil).ok(t) // served from the cache
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	f.call("GET", "/api/v1/me", f.member, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)

	f.call("GET", "/api/v1/me", f.admin, nil).ok(t)
	revokeUnannounced(f.adminID)
	f.call("GET", "/api/v1/me", f.admin, nil).ok(t) // served from the cache
	f.exec("SELECT pg_notify('credentials_revoked', '')")
	require.Eventually(t, func() bool {
		return f.call("GET", "/api/v1/me", f.admin, nil).Status == http.StatusUnauthorized
	}, 30*time.Second, 10*time.Millisecond, "the announcement empties the cache")
}
