package boxroot

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFinishReportsAndEndsLeaks leaves a process naming a state folder and the
// folder itself behind, as a leaked box does: Finish reports both, kills the
// process and removes the process's box folder. It is the package's only test
// because Finish ends the folder for the whole process.
func TestFinishReportsAndEndsLeaks(t *testing.T) {
	state, err := StateDir()
	require.NoError(t, err)
	_, err = BinDir()
	require.NoError(t, err)
	leaked := exec.Command("sh", "-c", "read _", "box", filepath.Join(state, "boxes", "box-1", "control"))
	stdin, err := leaked.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	require.NoError(t, leaked.Start())

	err = Finish()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "still running")
	assert.Contains(t, err.Error(), "folder left behind: "+state)
	assert.Error(t, leaked.Wait(), "the leaked process was killed")
	_, err = os.Stat(filepath.Dir(state))
	assert.True(t, os.IsNotExist(err), "the box folder is removed")
}
