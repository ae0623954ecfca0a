package main

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/testutil"
)

// TestClientCommandsEndToEnd drives the dev stack through package client and the
// astrabox client commands, as a person with var/dev.env would: the administrator makes
// a second user and their token (`astrabox users`, `astrabox tokens`); that user runs a
// conversation with the pinned Claude Code in a real box (`astrabox sessions`), shares
// it, and a viewer without an account reads it through the link; disabling the user
// stops their token at once.
func TestClientCommandsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	stack := newDevSetup(t)
	dev := startProcess(t, stack.bin, stack.env, "dev")
	vars := waitForDevEnv(t, dev, stack.envFile)
	serviceURL, adminToken := vars["SERVICE_URL"], vars["ACCESS_TOKEN"]
	ctx := testutil.ContextWithTimeout(t, 10*time.Minute)

	// cli runs an astrabox client command as token and returns its standard output.
	cli := func(token string, args ...string) string {
		t.Helper()
		out, code := run(t, stack.bin, []string{"SERVICE_URL=" + serviceURL, "ACCESS_TOKEN=" + token}, args...)
		require.Equal(t, 0, code, "astrabox %s:\n%s\nplatform:\n%s", strings.Join(args, " "), out, dev.output)
		return out
	}
	decode := func(out string, v any) {
		t.Helper()
		require.NoError(t, json.Unmarshal([]byte(out), v), out)
	}

	// The administrator makes a second user and their token.
	var user client.User
	decode(cli(adminToken, "users", "create", "second@example.test", "--display-name", "Second", "--json"), &user)
	assert.Equal(t, "member", user.Role)
	var issued client.IssuedToken
	decode(cli(adminToken, "tokens", "create", user.UserID, "--name", "e2e", "--expires-in", "1h", "--json"), &issued)
	require.NotEmpty(t, issued.Secret)
	require.NotNil(t, issued.ExpiresAt)
	second, err := client.New(serviceURL, issued.Secret)
	require.NoError(t, err)
	me, err := second.Me(ctx)
	require.NoError(t, err)
	assert.Equal(t, user.UserID, me.User.UserID)
	assert.Contains(t, cli(adminToken, "tokens", "list", user.UserID), issued.Prefix)
	assert.NotContains(t, cli(adminToken, "tokens", "list", user.UserID, "--json"), issued.Secret)

	// The second user converses through the commands.
	var created client.CreatedSession
	decode(cli(issued.Secret, "sessions", "create", vars["AGENT_ID"], "--idempotency-key", "e2e-client", "--json"), &created)
	var receipt client.Receipt
	decode(cli(issued.Secret, "sessions", "send", created.SessionID, "Say hello from the command line.", "--client-message-id", "cli-1", "--json"), &receipt)
	assert.False(t, receipt.Duplicate)
	streamed := cli(issued.Secret, "sessions", "stream", created.SessionID, "--after-seq", strconv.FormatInt(receipt.OutputSeq, 10), "--json")
	var text strings.Builder
	var lastSeq int64
	var lastType string
	lines := bufio.NewScanner(strings.NewReader(streamed))
	for lines.Scan() {
		var line struct {
			Seq  int64 `json:"seq"`
			Part struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
			} `json:"part"`
		}
		decode(lines.Text(), &line)
		require.Greater(t, line.Seq, lastSeq, "seqs count up")
		lastSeq, lastType = line.Seq, line.Part.Type
		if line.Part.Type == "text-delta" {
			text.WriteString(line.Part.Delta)
		}
	}
	assert.Equal(t, "finish", lastType, "the stream ends with the response:\n%s", streamed)
	assert.Contains(t, text.String(), "Say hello from the command line.", "the scripted model echoes the message")

	// The same response again, for people: its text, then its end.
	replay := cli(issued.Secret, "sessions", "stream", created.SessionID, "--after-seq", strconv.FormatInt(receipt.OutputSeq, 10))
	assert.Contains(t, replay, "Say hello from the command line.")
	assert.Contains(t, replay, "[finish seq="+strconv.FormatInt(lastSeq, 10)+"]")
	assert.Contains(t, cli(issued.Secret, "sessions", "get", created.SessionID), created.SessionID)

	var page client.SessionPage
	decode(cli(issued.Secret, "sessions", "list", "--json"), &page)
	require.Len(t, page.Sessions, 1)
	assert.Equal(t, created.SessionID, page.Sessions[0].SessionID)
	decode(cli(adminToken, "sessions", "list", "--json"), &page)
	assert.Empty(t, page.Sessions, "the administrator's own list holds only their Sessions")

	dev.waitUntil(t, time.Minute, "the Session to be READY", func() bool {
		s, err := second.GetSession(ctx, created.SessionID)
		return err == nil && s.State == "READY"
	})
	// The scripted model service titles the Session after its first response
	// (dev.titles), as a deployment's model service does with titles.enabled.
	dev.waitUntil(t, time.Minute, "an automatic title", func() bool {
		s, err := second.GetSession(ctx, created.SessionID)
		return err == nil && s.Title != nil && *s.Title != ""
	})
	assert.Equal(t, "idle\n", cli(issued.Secret, "sessions", "interrupt", created.SessionID))
	out, code := run(t, stack.bin, []string{"SERVICE_URL=" + serviceURL, "ACCESS_TOKEN=" + issued.Secret},
		"sessions", "answer", created.SessionID, "00000000-0000-4000-8000-000000000000", "--decision", "approve")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "NOT_FOUND")

	// A viewer with the link reads the conversation and its stream, with no account.
	link, err := second.CreateShare(ctx, created.SessionID, time.Now().Add(time.Hour), false)
	require.NoError(t, err)
	viewer, err := client.New(serviceURL, "")
	require.NoError(t, err)
	shared, err := viewer.SharedMessages(ctx, link.Token, client.MessagesOptions{})
	require.NoError(t, err)
	require.Len(t, shared.Messages, 2, "the message and its response")
	var viewed []client.Part
	for p, err := range viewer.SharedStream(ctx, link.Token, receipt.OutputSeq) {
		require.NoError(t, err)
		viewed = append(viewed, p)
	}
	require.NotEmpty(t, viewed)
	assert.Equal(t, lastSeq, viewed[len(viewed)-1].Seq, "the viewer's stream is the owner's")

	// Disabling the user stops their token at once, and their link.
	cli(adminToken, "users", "disable", user.UserID)
	_, err = second.Me(ctx)
	require.ErrorIs(t, err, client.ErrUnauthorized)
	_, err = viewer.SharedSession(ctx, link.Token)
	require.ErrorIs(t, err, client.ErrNotFound)
	out, code = run(t, stack.bin, []string{"SERVICE_URL=" + serviceURL, "ACCESS_TOKEN=" + issued.Secret}, "sessions", "list")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "UNAUTHORIZED")
	out, code = run(t, stack.bin, []string{"SERVICE_URL=", "ACCESS_TOKEN="}, "sessions", "list")
	assert.Equal(t, 2, code, "no service named is a usage error")
	assert.Contains(t, out, "SERVICE_URL")

	dev.interrupt(t)
	stack.assertStopped(t)
}
