package loadbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAWarningCarriesTheWorkersLinesAboutItsSession: the lines of every worker log
// that name the Session, interleaved by time, the latest kept, and no other
// Session's.
func TestAWarningCarriesTheWorkersLinesAboutItsSession(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	}
	write("worker.log", "==== worker start", "00:00:01.000\tINFO\trelay ended\tsession/s1", "00:00:03.000\tERROR\tbox lost\tsession/s1")
	write("worker-2.log", "00:00:02.000\tINFO\tclaimed\tsession/s1", "00:00:02.500\tINFO\tother\tsession/s2", "00:00:04.000\tINFO\tadopted "+strings.Repeat("x", 500)+" session/s1")
	write("serve.log", "00:00:05.000\tINFO\tserved\tsession/s1")

	lines := workerLogLines(dir, "session/s1", 3)
	require.Len(t, lines, 3, "the latest three of the four: %q", lines)
	assert.True(t, strings.HasPrefix(lines[0], "worker-2.log: 00:00:02.000"), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "worker.log: 00:00:03.000"), lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "worker-2.log: 00:00:04.000"), lines[2])
	assert.Less(t, len(lines[2]), 450, "a long line is cut")
	assert.Empty(t, workerLogLines(dir, "session/s3", 3))
}
