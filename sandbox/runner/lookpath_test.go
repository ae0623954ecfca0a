package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

// TestProgramsNamedByCommandAreFoundOnTheirOwnPath: a program named without a
// path is looked up on the PATH it starts with (an image's /usr/local/bin), not
// the runner's, for process sessions and exec alike; a name on neither fails.
func TestProgramsNamedByCommandAreFoundOnTheirOwnPath(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "image-bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "image-tool"), []byte("#!/bin/sh\necho from-image-path \"$@\"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "not-executable"), []byte("#!/bin/sh\n"), 0o644))
	_, c := startRunner(t, dir)
	path := map[string]string{"PATH": bin + ":/usr/bin:/bin"}

	res, err := c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"image-tool", "exec"}, Env: path})
	require.NoError(t, err)
	require.Equal(t, "from-image-path exec\n", string(res.Stdout))

	_, err = c.StartProcess(ctx, sandbox.ProcessSpec{ID: "tool", Argv: []string{"image-tool", "session"}, Env: path})
	require.NoError(t, err)
	st, err := c.Wait(ctx, "tool")
	require.NoError(t, err)
	require.Equal(t, 0, st.Exit.Code)
	out, err := c.Output(ctx, "tool", 0, false)
	require.NoError(t, err)
	defer out.Close()
	lines := readAll(t, out)
	require.Len(t, lines, 1)
	require.Equal(t, "from-image-path session", string(lines[0].Data))

	_, err = c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"image-tool"}})
	require.Error(t, err, "not on the box's default PATH")
	_, err = c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"not-executable"}, Env: path})
	require.Error(t, err, "a file the account may not execute is not a program")
}
