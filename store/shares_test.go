package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestSessionShares(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	now := time.Now()

	sh, token, err := st.CreateSessionShare(ctx, store.NewSessionShare{SessionID: f.session.ID, CreatedBy: f.user.ID,
		AllowDownload: true, ExpiresAt: now.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(token, "abs_"))
	require.Equal(t, store.HashAPIToken(token), sh.TokenHash)
	_, other, err := st.CreateSessionShare(ctx, store.NewSessionShare{SessionID: f.session.ID, CreatedBy: f.user.ID, ExpiresAt: now.Add(time.Hour)})
	require.NoError(t, err)
	require.NotEqual(t, token, other)

	got, err := st.GetActiveSessionShare(ctx, token, now)
	require.NoError(t, err)
	require.Equal(t, sh.ID, got.ID)
	require.True(t, got.AllowDownload)
	for name, tc := range map[string]struct {
		token string
		at    time.Time
	}{
		"expired":          {token, now.Add(time.Hour)},
		"unknown":          {token + "x", now},
		"an api token":     {"abx_" + strings.TrimPrefix(token, "abs_"), now},
		"no marker at all": {"anything", now},
	} {
		_, err := st.GetActiveSessionShare(ctx, tc.token, tc.at)
		require.ErrorIs(t, err, store.ErrNotFound, name)
	}

	// A disabled owner's links stop, and come back when the owner is enabled.
	_, err = st.SetUserDisabled(ctx, f.user.ID, true, now)
	require.NoError(t, err)
	_, err = st.GetActiveSessionShare(ctx, token, now)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.SetUserDisabled(ctx, f.user.ID, false, now)
	require.NoError(t, err)
	_, err = st.GetActiveSessionShare(ctx, token, now)
	require.NoError(t, err)

	revoked, err := st.RevokeSessionShare(ctx, f.session.ID, sh.ID)
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	again, err := st.RevokeSessionShare(ctx, f.session.ID, sh.ID)
	require.NoError(t, err)
	require.True(t, revoked.RevokedAt.Equal(*again.RevokedAt), "revoking twice keeps the first time")
	_, err = st.GetActiveSessionShare(ctx, token, now)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.RevokeSessionShare(ctx, "00000000-0000-0000-0000-000000000000", sh.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "a link of another Session")

	shares, err := st.ListSessionShares(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, shares, 2)

	// A deleted Session's links are gone.
	_, err = st.DeleteSession(ctx, f.session.ID)
	require.NoError(t, err)
	_, err = st.GetActiveSessionShare(ctx, other, now)
	require.ErrorIs(t, err, store.ErrNotFound)
}
