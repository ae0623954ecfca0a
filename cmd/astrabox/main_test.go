package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run executes the built binary and returns its combined output and exit code.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

func TestExitCodesAndMessages(t *testing.T) {
	bin := buildAstrabox(t)
	closed := freePorts(t, 1)[0]

	t.Run("bad configuration exits 2 with one line naming the key", func(t *testing.T) {
		out, code := run(t, bin, []string{"ASTRABOX_HTTP_ADDR=8080"}, "serve")
		assert.Equal(t, 2, code)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, out)
		assert.Contains(t, out, "http.addr")
		assert.Contains(t, out, "host:port")
	})
	t.Run("unknown command exits 2", func(t *testing.T) {
		out, code := run(t, bin, nil, "frobnicate")
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "frobnicate")
	})
	t.Run("unreachable database fails after a bounded retry without the password", func(t *testing.T) {
		out, code := run(t, bin, []string{
			"ASTRABOX_DATABASE_PORT=" + strconv.Itoa(closed),
			"ASTRABOX_DATABASE_PASSWORD=hunter2-secret",
			"ASTRABOX_STARTUP_TIMEOUT=1s",
			"ASTRABOX_LOG_LEVEL=error",
		}, "serve")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "PostgreSQL")
		assert.Contains(t, out, strconv.Itoa(closed))
		assert.NotContains(t, out, "hunter2-secret")
	})
	t.Run("version", func(t *testing.T) {
		out, code := run(t, bin, nil, "version")
		assert.Equal(t, 0, code)
		assert.True(t, strings.HasPrefix(out, "astrabox "), out)
	})
}
