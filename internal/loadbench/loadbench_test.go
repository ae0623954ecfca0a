package loadbench_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/loadbench"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// TestSmoke runs the load generator at its smallest (two Sessions of the scripted
// program and two of the real Claude Code, one measured reply of a few deltas) and
// checks that it measured every figure and its floors and stopped everything it
// started (Run fails when a process is left behind).
func TestSmoke(t *testing.T) {
	table := runSmall(t, loadbench.Options{Sessions: []int{2}, ClaudeSessions: 2})
	for _, figure := range []string{"durable parts/s @2", "event-to-part @2", "input receipt @2", "time to first part @2",
		"commit-to-SSE @2 x2", "worker heap/idle Session @2", "worker heap/released Session @2", "history events/turn @2",
		"time to first part (Claude Code) @2", "cold start (box + runtime) (Claude Code) @2",
		"accepted to delivered @2", "accepted to first part committed @2", "burst of 4: accepted to delivered @2", "burst of 4: accepted to admitted @2",
		"accepted to delivered (Claude Code) @2", "accepted to first part committed (Claude Code) @2"} {
		line := lineOf(table, figure)
		require.NotEmpty(t, line, "the table has %q:\n%s", figure, table)
		assert.NotContains(t, line, " 0.0 ms", "a measured figure is never zero: %s", line)
	}
	assert.Contains(t, lineOf(table, "durable parts/s @2"), "durable ", "the durable floor is measured")
	assert.Contains(t, lineOf(table, "durable parts/s @2"), "program ", "the program floor is measured")
	assert.Regexp(t, `^worker goroutines/idle Session @2 +report +[1-9][0-9.]* \(stacks -?[0-9]+ KiB\)`, lineOf(table, "worker goroutines/idle Session @2"),
		"a live Session holds goroutines in the worker (its Relay's at least)")
	assert.Regexp(t, `^worker heap/released Session @2 +~0 \(live <= 10 KiB\) +-?[0-9]+ KiB \(live -?[0-9]+ KiB, -?[0-9.]+ goroutines\)`,
		lineOf(table, "worker heap/released Session @2"), "every box was released after sandbox.idle_release and the worker measured then")
	assert.Regexp(t, `^commit-to-SSE @2 x2 +p99 <= 30 ms \(20 x10\) +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ `, lineOf(table, "commit-to-SSE @2 x2"),
		"a bare LISTEN and SSE server's delivery of committed parts is commit-to-SSE's floor")
	assert.Regexp(t, `^event-to-part @2 +p99 <= 20.0 ms +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ `, lineOf(table, "event-to-part @2"),
		"the program floor's own event-to-read is event-to-part's floor")
	assert.Regexp(t, `^Relay read to commit @2 +report +[0-9.]+ ms +[0-9.]+ ms `, lineOf(table, "Relay read to commit @2"),
		"the workers' Relay lag splits event-to-part")
	assert.Regexp(t, `^Relay read to commit, admissions @2 +report +[0-9.]+ ms +[0-9.]+ ms `, lineOf(table, "Relay read to commit, admissions @2"),
		"the batches that admitted the measured inputs, behind the session log's mirror")
	assert.NotContains(t, lineOf(table, "Relay read to commit, admissions @2"), " 0.0 ms", "each measured input was admitted by a batch")
	assert.Regexp(t, `^session log mirror @2 +report +[0-9.]+ ms +[0-9.]+ ms `, lineOf(table, "session log mirror @2"),
		"the scripted program's session log was mirrored before each admission")
	assert.NotContains(t, lineOf(table, "session log mirror @2"), " 0.0 ms")
	assert.Regexp(t, `^time to first part \(Claude Code\) @2 +p99 - floor <= 50 ms +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+ `,
		lineOf(table, "time to first part (Claude Code) @2"), "Claude Code's own time to first output is the floor, measured in the same run")
	// Each measured input was handed over once, from its notice or a read of custody.
	assert.Regexp(t, `^inputs handed over from their notice @2 +report +[0-2] of 2 `, lineOf(table, "inputs handed over from their notice @2"))
	assert.Regexp(t, `^inputs handed over from their notice \(Claude Code\) @2 +report +[0-2] of 2 `, lineOf(table, "inputs handed over from their notice (Claude Code) @2"))
	assert.Contains(t, table, "machine load: loadavg")
	assert.Contains(t, table, "cores used during the measured turns @2: boxes ", "the cores each part of the machine used are reported")
	assert.Contains(t, table, "cores used by the program floor @2: boxes ", "the cores the program floor used are reported")
	assert.Contains(t, table, "cores used during the measured turns (Claude Code) @2: boxes ")
	assert.Regexp(t, `(?m)^history events per measured turn @2: [0-9.]+, workflow tasks [0-9.]+, signals [0-9.]+, activities [0-9.]+, timers [0-9.]+, search attributes and memo [0-9.]+, markers [0-9.]+, other [0-9.]+$`,
		table, "the measured turns' history events are reported by kind")
	assert.Regexp(t, `(?m)^signals per measured turn @2: (none|[a-z-]+ [0-9.]+(, [a-z-]+ [0-9.]+)*)$`, table,
		"the measured turns' signals are reported by name")
	assert.Regexp(t, `(?m)^waits for a database connection during the measured turns @2: API (none|\d+ \(\S+ ms in all, \S+ ms each\)); workers (none|\d+ \(\S+ ms in all, \S+ ms each\))$`, table,
		"the processes' waits for their connection pools are reported")
	assert.Regexp(t, `(?m)^lock waits over 10\.0 ms in PostgreSQL during the measured turns @2: (none|[A-Za-z ]+ \d+ \(\S+ ms in all\)(, [A-Za-z ]+ \d+ \(\S+ ms in all\))*)$`, table,
		"the cluster's lock waits are reported")
	assert.Regexp(t, `(?m)^statements PostgreSQL ran per measured turn @2: [1-9][0-9]*\.[0-9] \(most often: .+ [0-9]+\.[0-9](; .+ [0-9]+\.[0-9])*\)$`, table,
		"the statements the measured turns cost are counted")
	assert.Contains(t, table, "cores used by the program floor (Claude Code) @2: boxes ")
}

// TestTwoReplicasKeepEveryReplyWholeThroughAWorkersStopAndKill runs the load
// generator with two API and two worker processes: its last phases stop (SIGTERM), then
// SIGKILL, the worker holding the most Sessions mid-reply, and every follower of every
// Session, on either API, must still read its reply whole through the other worker.
func TestTwoReplicasKeepEveryReplyWholeThroughAWorkersStopAndKill(t *testing.T) {
	table := runSmall(t, loadbench.Options{Sessions: []int{3}, Replicas: 2})
	for _, end := range []struct{ noun, participle string }{{"stop", "stopped"}, {"kill", "killed"}} {
		whole := "replies whole through a worker's " + end.noun + " @3"
		assert.Regexp(t, `^`+whole+` +every reply whole +3 of 3 \([1-3] on the `+end.participle+` worker\) .* yes$`, lineOf(table, whole))
		stall := "stream stall through a worker's " + end.noun + " @3"
		assert.Regexp(t, `^`+stall+` +report +[1-9][0-9]*\.[0-9] ms `, lineOf(table, stall),
			"the ended worker's Sessions' streams stalled and resumed")
	}
}

// runSmall runs the load generator with opts' Sessions and replicas and the smallest
// load (one measured reply of five deltas, two followers) and returns its table. The
// tests do not run in parallel: each starts a whole stack with real boxes and reads
// the machine's CPU per process, which a second stack would blur.
func runSmall(t *testing.T, opts loadbench.Options) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole platform with real boxes")
	}
	localtest.RequireBoxes(t)
	ctx := testutil.ContextWithTimeout(t, 9*time.Minute)
	opts.Turns, opts.Deltas, opts.Gap, opts.Followers, opts.Timeout = 1, 5, time.Millisecond, 2, 8*time.Minute
	// Past the measurement of idle Sessions (8 s quiet after their turn).
	opts.IdleRelease = 20 * time.Second
	// Warnings say why a figure missed its goal (a reply not read whole names what it
	// lacked).
	opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	var out bytes.Buffer
	err := loadbench.Run(ctx, opts, &out)
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())
	return out.String()
}

func lineOf(table, figure string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, figure+" ") {
			return l
		}
	}
	return ""
}
