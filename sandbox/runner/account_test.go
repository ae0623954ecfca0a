package runner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// programUID is the account the test runs programs as: nobody, which every
// Debian machine has.
const programUID = 65534

// TestProgramAccount: with a program account configured, processes, commands
// and file operations run as that account, while the runner keeps its own
// identity for its journals; a link the program planted to the runner's state
// is followed with the program's rights only.
func TestProgramAccount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if testing.Short() {
			t.Skip("needs root to switch accounts")
		}
		t.Fatal("this test switches accounts: run it as root (CI does)")
	}
	ctx := testContext(t)
	// Directly under /tmp: t.TempDir's parent is private to root.
	state, ws := t.TempDir(), mkdirTemp(t)
	require.NoError(t, os.Chown(ws, programUID, programUID))
	require.NoError(t, os.Chmod(ws, 0o700))
	r, c := startRunnerWith(t, runnerapi.Config{StateDir: state, Workspace: ws, ProgramUID: programUID, ProgramGID: programUID})

	res, err := c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "id -u; id -g; id -G; pwd"}})
	require.NoError(t, err)
	require.Equal(t, "65534\n65534\n65534\n"+ws+"\n", string(res.Stdout), "stderr: %s", res.Stderr)

	_, err = c.StartProcess(ctx, sandbox.ProcessSpec{ID: "p", Argv: []string{"/bin/sh", "-c", "id -u; touch made-by-program"}})
	require.NoError(t, err)
	st, err := c.Wait(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, 0, st.Exit.Code)
	owner := func(path string) uint32 {
		info, err := os.Stat(path)
		require.NoError(t, err)
		return info.Sys().(*syscall.Stat_t).Uid
	}
	require.Equal(t, uint32(programUID), owner(filepath.Join(ws, "made-by-program")))
	journal := filepath.Join(r.bootDir(), "proc", "p", "journal")
	require.Equal(t, uint32(0), owner(journal), "the journal is the runner's")

	require.NoError(t, c.WriteFile(ctx, filepath.Join(ws, "sub", "f"), []byte("x"), 0o600))
	require.Equal(t, uint32(programUID), owner(filepath.Join(ws, "sub", "f")))
	require.Equal(t, uint32(programUID), owner(filepath.Join(ws, "sub")))

	require.NoError(t, os.Symlink(journal, filepath.Join(ws, "journal-link")))
	_, err = c.ReadFile(ctx, filepath.Join(ws, "journal-link"))
	require.ErrorContains(t, err, "permission denied")
	_, err = c.ListDir(ctx, state)
	require.ErrorContains(t, err, "permission denied")

	// The runner's own identity came back: it still makes journals.
	_, err = c.StartProcess(ctx, sandbox.ProcessSpec{ID: "q", Argv: []string{"/bin/true"}})
	require.NoError(t, err)
}

func mkdirTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abx-program")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
