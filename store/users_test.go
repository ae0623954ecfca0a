package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestUsersAndAPITokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	_, err := st.CreateUser(ctx, store.NewUser{Email: strings.ToUpper(f.user.Email)})
	require.ErrorIs(t, err, store.ErrDuplicate, "emails are unique case-insensitively")

	admin, err := st.CreateUser(ctx, store.NewUser{Email: uniq("admin") + "@example.com", Role: store.RoleAdmin})
	require.NoError(t, err)
	require.True(t, admin.IsAdmin())
	got, err := st.GetUserByEmail(ctx, strings.ToUpper(admin.Email))
	require.NoError(t, err)
	require.Equal(t, admin.ID, got.ID)

	tok, plaintext, err := st.CreateAPIToken(ctx, f.user.ID, "cli", nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(plaintext, tok.Prefix))
	require.Len(t, tok.TokenHash, 32)
	require.NotContains(t, string(tok.TokenHash), plaintext)

	byHash, err := st.GetAPITokenByHash(ctx, store.HashAPIToken(plaintext))
	require.NoError(t, err)
	require.Equal(t, tok.ID, byHash.ID)

	require.NoError(t, st.TouchAPIToken(ctx, tok.ID, time.Now(), time.Minute))
	u, gotTok, err := st.GetUserByAPIToken(ctx, plaintext, time.Now())
	require.NoError(t, err)
	require.Equal(t, f.user.ID, u.ID)
	// The joined lookup reads every column of both rows.
	byHash, err = st.GetAPITokenByHash(ctx, store.HashAPIToken(plaintext))
	require.NoError(t, err)
	require.NotNil(t, byHash.LastUsedAt)
	require.Equal(t, byHash, gotTok)
	byID, err := st.GetUserByID(ctx, f.user.ID)
	require.NoError(t, err)
	require.Equal(t, byID, u)

	_, _, err = st.GetUserByAPIToken(ctx, plaintext+"x", time.Now())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = st.GetUserByAPIToken(ctx, "not-a-token", time.Now())
	require.ErrorIs(t, err, store.ErrNotFound)

	expiry := time.Now().Add(time.Hour)
	_, shortLived, err := st.CreateAPIToken(ctx, f.user.ID, "short", &expiry)
	require.NoError(t, err)
	_, _, err = st.GetUserByAPIToken(ctx, shortLived, expiry.Add(time.Second))
	require.ErrorIs(t, err, store.ErrNotFound, "expired")

	require.NoError(t, st.RevokeAPIToken(ctx, tok.ID))
	_, _, err = st.GetUserByAPIToken(ctx, plaintext, time.Now())
	require.ErrorIs(t, err, store.ErrNotFound, "revoked")
	require.ErrorIs(t, st.RevokeAPIToken(ctx, "00000000-0000-0000-0000-000000000000"), store.ErrNotFound)
}

func TestPingAndOpenErrorsHidePassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.st.Ping(f.ctx))

	ctx := f.ctx
	// Nothing listens on port 1: Open gives up within its bound and never shows the
	// password.
	_, err := store.Open(ctx, "postgres://someone:s3cret-pw@127.0.0.1:1/db?sslmode=disable", nil, store.Options{ConnectTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.Contains(t, err.Error(), "xxxxx")

	require.Equal(t, "postgres://u:xxxxx@h/db", store.RedactDSN("postgres://u:pw@h/db"))
	require.Equal(t, "host=h user=u password=xxxxx", store.RedactDSN("host=h user=u password=pw"))
}

func TestDisabledUserTokensAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	tok, plaintext, err := st.CreateAPIToken(ctx, f.user.ID, "cli", nil)
	require.NoError(t, err)

	now := time.Now()
	u, err := st.SetUserDisabled(ctx, f.user.ID, true, now)
	require.NoError(t, err)
	require.True(t, u.Disabled())
	_, _, err = st.GetUserByAPIToken(ctx, plaintext, now)
	require.ErrorIs(t, err, store.ErrNotFound, "a disabled user's token is refused")
	again, err := st.SetUserDisabled(ctx, f.user.ID, true, now.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, u.DisabledAt.Equal(*again.DisabledAt), "disabling twice keeps the first time")

	u, err = st.SetUserDisabled(ctx, f.user.ID, false, now)
	require.NoError(t, err)
	require.False(t, u.Disabled())
	_, _, err = st.GetUserByAPIToken(ctx, plaintext, now)
	require.NoError(t, err)

	tokens, err := st.ListAPITokensByUser(ctx, f.user.ID)
	require.NoError(t, err)
	require.Len(t, tokens, 1)
	other, err := st.CreateUser(ctx, store.NewUser{Email: uniq("other") + "@example.com"})
	require.NoError(t, err)
	_, err = st.RevokeUserAPIToken(ctx, other.ID, tok.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "a token of another user")
	revoked, err := st.RevokeUserAPIToken(ctx, f.user.ID, tok.ID)
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = st.SetUserDisabled(ctx, "00000000-0000-0000-0000-000000000000", true, now)
	require.ErrorIs(t, err, store.ErrNotFound)
}
