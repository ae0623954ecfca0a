package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// temporalStarted finds each start of the dev server in the dev stack's log.
var temporalStarted = regexp.MustCompile(`temporal dev server started\s+\{"pid": (\d+)`)

// TestTemporalOutageEndToEnd kills the Temporal dev server's whole process
// group while a reply streams: the dev stack restarts it on the same database,
// the reply completes on the open stream with contiguous seqs, the Session is
// not terminated and answers its next message, and Ctrl-C then ends everything.
func TestTemporalOutageEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, agentID, validator := startRoutesStack(t)
	sessionID := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "outage", http.StatusOK)["session_id"].(string)
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=80 delay=100ms]]","client_message_id":"during-outage"}`, "", http.StatusOK)
	c.dev.waitUntil(t, 2*time.Minute, "an open response", func() bool {
		open, _ := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["current_responses"].([]any)
		return len(open) > 0
	})

	// The stream needs only PostgreSQL: it stays open through the outage.
	streamed := make(chan streamRead, 1)
	go func() { streamed <- c.readStream(sessionID, 0, 3*time.Minute) }()

	starts := temporalStarted.FindAllStringSubmatch(c.dev.output.String(), -1)
	require.Len(t, starts, 1, "one Temporal start so far:\n%s", c.dev.output)
	pid, err := strconv.Atoi(starts[0][1])
	require.NoError(t, err)
	killed := time.Now()
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL), "kill the Temporal dev server's process group")
	c.dev.waitUntil(t, 2*time.Minute, "Temporal to be restarted", func() bool {
		return len(temporalStarted.FindAllStringSubmatch(c.dev.output.String(), -1)) == 2
	})
	restarted := time.Since(killed)
	waitHTTP(t, c.dev, strings.TrimSuffix(c.base, "/api/v1")+"/readyz", http.StatusOK)
	t.Logf("Temporal restarted %v after the kill, ready again after %v", restarted.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	var read streamRead
	select {
	case read = <-streamed:
	case <-time.After(4 * time.Minute):
		t.Fatalf("the stream did not end; platform:\n%s", c.dev.output)
	}
	require.NoError(t, read.err, "stream so far:\n%s\nplatform:\n%s", read.raw, c.dev.output)
	report, err := validator.SSE(context.Background(), read.raw, nil)
	require.NoError(t, err)
	require.NoError(t, report.Err(), "stream:\n%s", read.raw)
	require.True(t, report.Done, "the reply completed: %s", read.raw)
	require.Len(t, report.Messages, 1)
	assert.Contains(t, messageText(report.Messages[0]), "Slow chunk 80 of 80")
	seqs := resumeSeqs(read.raw)
	require.NotEmpty(t, seqs)
	for i, seq := range seqs {
		require.Equal(t, i+1, seq, "seqs are contiguous from 1, none repeated or missing: %v", seqs)
	}

	// The Session outlived the outage and answers its next message.
	c.waitState(sessionID, "READY")
	session := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)
	assert.NotEqual(t, "TERMINATED", session["state"])
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Are you still there?","client_message_id":"after-outage"}`, "", http.StatusOK)
	next := c.stream(validator, sessionID, seqs[len(seqs)-1])
	require.Len(t, next.report.Messages, 1)
	assert.Contains(t, messageText(next.report.Messages[0]), "Are you still there?")

	c.dev.interrupt(t)
	c.setup.assertStopped(t)
}

// streamRead is one stream read to its end, or as far as it got.
type streamRead struct {
	raw []byte
	err error
}

// readStream reads the stream from after to its end within timeout. It runs on
// its own goroutine, so it reports failures instead of failing the test.
func (c *apiClient) readStream(sessionID string, after int, timeout time.Duration) streamRead {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/sessions/%s/stream?after_seq=%d", c.base, sessionID, after), nil)
	if err != nil {
		return streamRead{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamRead{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("stream answered %d", resp.StatusCode)
	}
	return streamRead{raw: raw, err: err}
}

// resumeSeqs returns the seqs of a stream's resume cursors, in order.
func resumeSeqs(raw []byte) []int {
	var seqs []int
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var part struct {
			Type string `json:"type"`
			Data struct {
				Seq int `json:"seq"`
			} `json:"data"`
		}
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if ok && json.Unmarshal([]byte(line), &part) == nil && part.Type == "data-resume-cursor" {
			seqs = append(seqs, part.Data.Seq)
		}
	}
	return seqs
}
