package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// foregroundSleep is a terminal command that prints "started" once it runs as
// itself (a SIGINT before that would be lost, as a too early Ctrl-C is).
const foregroundSleep = "sh -c 'echo started; exec sleep 1000'\n"

// TestWorkspaceAndTerminalEndToEnd follows the Sessions document's "attach and
// download files" and web terminal against the whole platform with Claude
// Code: a user uploads a file, asks the Agent program to change it, downloads
// the result, runs and interrupts commands in the terminal, and the
// conversation's interrupt and the terminal's leave each other's work alone.
func TestWorkspaceAndTerminalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, agentID, validator := startRoutesStack(t)
	sessionID := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "workspace-e2e", http.StatusOK)["session_id"].(string)
	files := "/sessions/" + sessionID + "/workspace/files"

	// Files can be attached once the runtime is ready.
	first := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs", `{"content":"Hello.","client_message_id":"hello"}`, "", http.StatusOK)
	require.NotEmpty(t, first["input_id"])
	opened := c.stream(validator, sessionID, 0)
	c.waitState(sessionID, "READY")
	c.uploadRaw(files+"?path=notes.txt", "hello world\n")
	listed := c.call(http.MethodGet, files, ``, "", http.StatusOK)
	assert.Contains(t, fmt.Sprint(listed["entries"]), "notes.txt")

	// The Agent program changes the file (the user approves its command); the
	// download has its change.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Change the greeting. [[script:bash cmd=\"sed -i s/hello/goodbye/ notes.txt\"]]","client_message_id":"edit"}`, "", http.StatusOK)
	asked := c.readUntil(validator, sessionID, opened.lastSeq, func(types map[string]bool, finish string) bool {
		return types["data-interaction"] && finish == "tool-calls"
	})
	var interactionID string
	c.dev.waitUntil(t, time.Minute, "a pending approval", func() bool {
		s := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)
		if p, ok := s["pending_interaction"].(map[string]any); ok {
			interactionID, _ = p["interaction_id"].(string)
		}
		return interactionID != ""
	})
	c.call(http.MethodPost, "/sessions/"+sessionID+"/interactions/"+interactionID+"/answer", `{"answer":{"decision":"approve"}}`, "", http.StatusOK)
	c.continueStream(validator, sessionID, asked.lastSeq, asked.report.Messages[0])
	edited := streamed{lastSeq: c.responseEnd(sessionID, asked.lastSeq)}
	c.waitState(sessionID, "READY")
	assert.Equal(t, "goodbye world\n", c.download("/sessions/"+sessionID+"/workspace/download?path=notes.txt"))

	// The terminal runs a command in the same workspace.
	term := c.openTerminal(sessionID)
	term.send(`PS1='READY''> '; cat notes.txt` + "\n")
	term.waitFor("goodbye world\r\n")
	term.waitFor("READY> ")

	// The conversation's interrupt leaves a terminal command running.
	term.send(foregroundSleep)
	term.waitFor("started\r\n")
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=300 delay=100ms]]","client_message_id":"slow-1"}`, "", http.StatusOK)
	c.waitOpenResponse(sessionID)
	assert.Equal(t, "accepted", c.call(http.MethodPost, "/sessions/"+sessionID+"/interrupt", ``, "", http.StatusOK)["status"])
	cancelled := c.stream(validator, sessionID, edited.lastSeq)
	require.Len(t, cancelled.report.Messages, 1)
	assert.Contains(t, string(cancelled.report.Messages[0].Metadata), "cancelled")
	c.waitState(sessionID, "READY")
	interrupt := "/sessions/" + sessionID + "/terminal/interrupt"
	assert.Equal(t, true, c.call(http.MethodPost, interrupt, ``, "", http.StatusOK)["interrupted"], "the sleep outlived the conversation's interrupt")
	term.waitFor("READY> ")
	term.send("echo \"rc=$?\"\n")
	term.waitFor("rc=130")
	term.waitFor("READY> ")
	assert.Equal(t, false, c.call(http.MethodPost, interrupt, ``, "", http.StatusOK)["interrupted"], "nothing runs at the prompt")

	// The terminal's interrupt leaves the response in progress alone.
	term.send(foregroundSleep)
	term.waitFor("started\r\n")
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain briefly. [[script:slow chunks=30 delay=100ms]]","client_message_id":"slow-2"}`, "", http.StatusOK)
	c.waitOpenResponse(sessionID)
	assert.Equal(t, true, c.call(http.MethodPost, interrupt, ``, "", http.StatusOK)["interrupted"])
	finished := c.stream(validator, sessionID, cancelled.lastSeq)
	require.Len(t, finished.report.Messages, 1)
	assert.NotContains(t, string(finished.report.Messages[0].Metadata), "cancelled", "the response ran to its end")
	term.waitFor("READY> ")
	term.close()

	// Archived, the Session releases its sandbox: the workspace answers 409.
	c.waitState(sessionID, "READY")
	c.call(http.MethodPost, "/sessions/"+sessionID+"/archive", ``, "", http.StatusOK)
	c.dev.waitUntil(t, time.Minute, "the workspace to become unavailable", func() bool {
		resp := c.request(http.MethodGet, files, "", "")
		resp.Body.Close()
		return resp.StatusCode == http.StatusConflict
	})
	c.expectError(http.MethodGet, files, "", c.token, http.StatusConflict, "WORKSPACE_UNAVAILABLE")
	c.dev.interrupt(t)
	c.setup.assertStopped(t)
}

// responseEnd reads the stream from after to the end of the response in
// progress there and returns its last resume cursor.
func (c *apiClient) responseEnd(sessionID string, after int) int {
	c.t.Helper()
	resp := c.request(http.MethodGet, fmt.Sprintf("/sessions/%s/stream?after_seq=%d", sessionID, after), "", "")
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	last := after
	for _, line := range strings.Split(string(raw), "\n") {
		var chunk struct {
			Type string `json:"type"`
			Data struct {
				Seq int `json:"seq"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &chunk) == nil && chunk.Type == "data-resume-cursor" {
			last = chunk.Data.Seq
		}
	}
	require.Greater(c.t, last, after, "the response went on after the approval")
	return last
}

// uploadRaw writes one file through the files API.
func (c *apiClient) uploadRaw(path, content string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(content))
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, string(raw))
}

// download returns a file's bytes.
func (c *apiClient) download(path string) string {
	c.t.Helper()
	resp := c.request(http.MethodGet, path, "", "")
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, string(raw))
	return string(raw)
}

// waitOpenResponse waits until the program has opened a response.
func (c *apiClient) waitOpenResponse(sessionID string) {
	c.t.Helper()
	c.dev.waitUntil(c.t, time.Minute, "an open response", func() bool {
		open, _ := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["current_responses"].([]any)
		return len(open) > 0
	})
}

// terminalClient is one viewer of a Session's web terminal.
type terminalClient struct {
	t    *testing.T
	conn *websocket.Conn
	seen strings.Builder
	from int
}

func (c *apiClient) openTerminal(sessionID string) *terminalClient {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := strings.Replace(c.base, "http", "ws", 1) + "/sessions/" + sessionID + "/terminal?cols=100&rows=30"
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}}})
	require.NoError(c.t, err)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	c.t.Cleanup(func() { conn.CloseNow() })
	return &terminalClient{t: c.t, conn: conn}
}

func (tc *terminalClient) send(keys string) {
	tc.t.Helper()
	require.NoError(tc.t, wsjson.Write(context.Background(), tc.conn, map[string]any{"type": "input", "text": keys}))
}

// waitFor reads output until text appears after what earlier waits matched.
func (tc *terminalClient) waitFor(text string) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !strings.Contains(tc.seen.String()[tc.from:], text) {
		var msg struct {
			Type    string `json:"type"`
			Data    []byte `json:"data"`
			Message string `json:"message"`
		}
		require.NoError(tc.t, wsjson.Read(ctx, tc.conn, &msg), "waiting for %q; saw %q", text, tc.seen.String())
		require.NotEqual(tc.t, "error", msg.Type, msg.Message)
		if msg.Type == "output" {
			tc.seen.Write(msg.Data)
		}
	}
	tc.from += strings.Index(tc.seen.String()[tc.from:], text) + len(text)
}

func (tc *terminalClient) close() {
	require.NoError(tc.t, tc.conn.Close(websocket.StatusNormalClosure, "done"))
}
