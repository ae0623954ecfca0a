package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// modeClient is a runtime client that only sets permission modes: it refuses the
// modes in refuse and fails every call with fail when set.
type modeClient struct {
	engines.RuntimeClient
	refuse []string
	fail   error
	mu     sync.Mutex
	asked  []string
}

func (c *modeClient) SetPermissionMode(_ context.Context, mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, mode)
	if c.fail != nil {
		return c.fail
	}
	if slices.Contains(c.refuse, mode) {
		return &engines.RuntimeControlRefused{Control: engines.ControlSetPermissionMode, Code: "refused", Message: "not " + mode}
	}
	return nil
}

var _ engines.PermissionModeSetter = (*modeClient)(nil)

// TestRefusedStoredModeIsSettled: a stored mode the program refuses never fails the
// caller; the program is put in the engine's default and the stored mode follows it,
// unless the owner chose another since. A failure that is not a refusal is returned.
func TestRefusedStoredModeIsSettled(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	st, _ := testutil.NewDB(t)
	a := &Activities{deps: Deps{Store: st}, log: zaptest.NewLogger(t)}
	caps := engines.EngineRuntimeCapabilities{PermissionModes: []string{"default", "plan", "bypassPermissions"},
		PermissionModeDefaults: map[engines.SessionKind]string{engines.SessionKindAgentChat: "default"}}
	user, err := st.CreateUser(ctx, store.NewUser{Email: uuid.NewString() + "@example.com"})
	require.NoError(t, err)
	profile, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: "p-" + uuid.NewString(), EngineKind: "modes", Enabled: true, SandboxBackend: store.SandboxLocal})
	require.NoError(t, err)
	agent, err := st.CreateAgent(ctx, store.NewAgent{Name: "a-" + uuid.NewString(), EngineKind: "modes", RuntimeProfileID: profile.ID})
	require.NoError(t, err)
	session := func(mode string) store.Session {
		sess, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: user.ID, AgentID: agent.ID})
		require.NoError(t, err)
		sess, err = st.SetSessionPermissionMode(ctx, sess.ID, mode)
		require.NoError(t, err)
		return sess
	}
	stored := func(id string) string {
		sess, err := st.GetSessionByID(ctx, id)
		require.NoError(t, err)
		if sess.PermissionMode == nil {
			return "<none>"
		}
		return *sess.PermissionMode
	}
	lost := fmt.Errorf("write: %w", engines.ErrRuntimeConnectionLost)

	for _, tc := range []struct {
		name   string
		client *modeClient
		// chosen is a mode the owner stored after the caller read the Session.
		chosen  string
		wantErr error
		asked   []string
		stored  string
	}{
		{name: "accepted", client: &modeClient{}, asked: []string{"bypassPermissions"}, stored: "bypassPermissions"},
		{name: "refused", client: &modeClient{refuse: []string{"bypassPermissions"}}, asked: []string{"bypassPermissions", "default"}, stored: "default"},
		{name: "default refused too", client: &modeClient{refuse: []string{"bypassPermissions", "default"}}, asked: []string{"bypassPermissions", "default"}, stored: "<none>"},
		{name: "owner chose since", client: &modeClient{refuse: []string{"bypassPermissions"}}, chosen: "plan", asked: []string{"bypassPermissions", "default"}, stored: "plan"},
		{name: "connection lost", client: &modeClient{fail: lost}, wantErr: engines.ErrRuntimeConnectionLost, asked: []string{"bypassPermissions"}, stored: "bypassPermissions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := session("bypassPermissions")
			if tc.chosen != "" {
				_, err := st.SetSessionPermissionMode(ctx, sess.ID, tc.chosen)
				require.NoError(t, err)
			}
			err := a.applyStoredMode(ctx, tc.client, caps, sess)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.asked, tc.client.asked)
			require.Equal(t, tc.stored, stored(sess.ID))
		})
	}
}
