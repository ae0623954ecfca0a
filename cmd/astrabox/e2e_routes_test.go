package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// TestSessionRoutesEndToEnd drives the Sessions routes the conversation test
// leaves out against the whole platform with Claude Code: auth and unknown ids,
// the list and its pages, renaming, an approval answered through the API, the
// busy rule, read marks, folded history, child runs, archive and delete.
func TestSessionRoutesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, agentID, validator := startRoutesStack(t)

	// Without a token nothing answers; an unknown Session is 404.
	c.expectError(http.MethodGet, "/sessions", "", "", http.StatusUnauthorized, "UNAUTHORIZED")
	c.expectError(http.MethodGet, "/sessions/00000000-0000-4000-8000-000000000000", "", c.token, http.StatusNotFound, "NOT_FOUND")

	older := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "routes-older", http.StatusOK)["session_id"].(string)
	newer := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "routes-newer", http.StatusOK)["session_id"].(string)

	// The unpaged list is an array, newest first; the paged one carries a cursor.
	assert.Equal(t, []string{newer, older}, c.listIDs("/sessions"))
	page := c.call(http.MethodGet, "/sessions?page=1&limit=1", ``, "", http.StatusOK)
	assert.Equal(t, true, page["has_more"])
	assert.Equal(t, []string{newer}, summaryIDs(page["sessions"]))
	cursor, _ := page["next_cursor"].(string)
	require.NotEmpty(t, cursor, "page 1 names the next page: %v", page)
	next := c.call(http.MethodGet, "/sessions?limit=1&cursor="+cursor, ``, "", http.StatusOK)
	assert.Equal(t, false, next["has_more"])
	assert.Equal(t, []string{older}, summaryIDs(next["sessions"]))

	// Renaming folds whitespace, refuses an empty title, and keeps the order.
	renamed := c.call(http.MethodPatch, "/sessions/"+older, `{"title":"  Flask\n\n scaffold \t review "}`, "", http.StatusOK)
	assert.Equal(t, "Flask scaffold review", renamed["title"])
	c.expectError(http.MethodPatch, "/sessions/"+older, `{"title":"  \n "}`, c.token, http.StatusBadRequest, "INVALID_REQUEST")
	assert.Equal(t, []string{newer, older}, c.listIDs("/sessions"))

	// Interrupting an idle Session has nothing to stop.
	c.waitState(older, "READY")
	assert.Equal(t, "idle", c.call(http.MethodPost, "/sessions/"+older+"/interrupt", ``, "", http.StatusOK)["status"])

	// In the default mode Claude Code asks before running a command; the
	// approval answered through the API lets the response finish.
	mode := c.call(http.MethodPost, "/sessions/"+older+"/permission-mode", `{"permission_mode":"default"}`, "", http.StatusOK)
	assert.Equal(t, "default", mode["permission_mode"])
	c.call(http.MethodPost, "/sessions/"+older+"/inputs",
		`{"content":"Create the marker. [[script:bash cmd=\"touch approved.txt\"]]","client_message_id":"approve-1"}`, "", http.StatusOK)
	var interactionID string
	c.dev.waitUntil(t, time.Minute, "a pending approval", func() bool {
		s := c.call(http.MethodGet, "/sessions/"+older, ``, "", http.StatusOK)
		if p, ok := s["pending_interaction"].(map[string]any); ok && s["state"] == "WAITING_INPUT" {
			interactionID, _ = p["interaction_id"].(string)
		}
		return interactionID != ""
	})
	asked := c.readUntil(validator, older, 0, func(types map[string]bool, finish string) bool {
		return types["tool-approval-request"] && types["data-interaction"] && finish == "tool-calls"
	})
	require.Len(t, asked.report.Messages, 1, "the paused response")
	paused := asked.report.Messages[0]
	require.Len(t, paused.PartsOfType("dynamic-tool"), 1)
	assert.Equal(t, "approval-requested", paused.PartsOfType("dynamic-tool")[0]["state"])
	answerPath := "/sessions/" + older + "/interactions/" + interactionID + "/answer"
	c.call(http.MethodPost, answerPath, `{"answer":{"decision":"approve"}}`, "", http.StatusOK)
	// The browser appends the rest of the response to the message it holds.
	rest := c.continueStream(validator, older, asked.lastSeq, paused)
	require.Len(t, rest.report.Messages, 1)
	tools := rest.report.Messages[0].PartsOfType("dynamic-tool")
	require.Len(t, tools, 1)
	assert.Equal(t, "Bash", tools[0]["toolName"])
	assert.Equal(t, "output-available", tools[0]["state"], "the approved command ran: %v", tools[0])
	c.expectError(http.MethodPost, answerPath, `{"answer":{"decision":"approve"}}`, c.token, http.StatusConflict, "INTERACTION_NOT_OPEN")
	c.waitState(older, "READY")

	// The response made the Session unread, and moved it to the top of the list.
	assert.Equal(t, true, c.call(http.MethodGet, "/sessions/"+older, ``, "", http.StatusOK)["unread"])
	read := c.call(http.MethodPost, "/sessions/"+older+"/read", ``, "", http.StatusOK)
	assert.Equal(t, false, read["unread"])
	assert.NotNil(t, read["read_at"])
	assert.Equal(t, []string{older, newer}, c.listIDs("/sessions"))

	// Folded history and child runs answer for a real conversation.
	blocks := c.call(http.MethodGet, "/sessions/"+older+"/history-blocks", ``, "", http.StatusOK)
	msgs, _ := blocks["messages"].([]any)
	assert.Len(t, msgs, 2, "one input and its response: %v", blocks)
	c.expectArray(http.MethodGet, "/sessions/"+older+"/child-runs")

	// A working program keeps its Session: archive is refused until interrupted.
	c.call(http.MethodPost, "/sessions/"+newer+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=200 delay=100ms]]","client_message_id":"slow-1"}`, "", http.StatusOK)
	c.dev.waitUntil(t, time.Minute, "the program working on an open response", func() bool {
		s := c.call(http.MethodGet, "/sessions/"+newer, ``, "", http.StatusOK)
		open, _ := s["current_responses"].([]any)
		return s["runtime_status"] == "working" && len(open) > 0
	})
	c.expectError(http.MethodPost, "/sessions/"+newer+"/archive", ``, c.token, http.StatusConflict, "SESSION_BUSY")
	assert.Equal(t, "accepted", c.call(http.MethodPost, "/sessions/"+newer+"/interrupt", ``, "", http.StatusOK)["status"])
	c.waitState(newer, "READY")

	// Archived: out of the active list, listed with archived=true, still readable.
	archived := c.call(http.MethodPost, "/sessions/"+newer+"/archive", ``, "", http.StatusOK)
	assert.Equal(t, true, archived["archived"])
	assert.Equal(t, []string{older}, c.listIDs("/sessions"))
	assert.Equal(t, []string{newer}, c.listIDs("/sessions?archived=true"))
	c.call(http.MethodGet, "/sessions/"+newer+"/messages", ``, "", http.StatusOK)

	// A message to an archived Session is taken into custody (the API answers
	// its receipt), then fails with CONVERSATION_ENDED: the runtime still being
	// torn down must not run it.
	const late = `{"content":"Anyone there?","client_message_id":"after-archive"}`
	sent := c.call(http.MethodPost, "/sessions/"+newer+"/inputs", late, "", http.StatusOK)
	assert.Equal(t, false, sent["duplicate"])
	c.dev.waitUntil(t, time.Minute, "the message to the archived Session to fail", func() bool {
		return c.call(http.MethodPost, "/sessions/"+newer+"/inputs", late, "", http.StatusOK)["state"] == "failed"
	})
	failure, _ := c.call(http.MethodPost, "/sessions/"+newer+"/inputs", late, "", http.StatusOK)["failure"].(map[string]any)
	assert.Equal(t, "CONVERSATION_ENDED", failure["code"])
	c.waitState(newer, "READY")

	// Deleted is terminal: the Session reads as DELETED and takes no message.
	deleted := c.call(http.MethodDelete, "/sessions/"+newer, ``, "", http.StatusOK)
	assert.Equal(t, "DELETED", deleted["state"])
	assert.Equal(t, "DELETED", c.call(http.MethodGet, "/sessions/"+newer, ``, "", http.StatusOK)["state"])
	c.call(http.MethodDelete, "/sessions/"+newer, ``, "", http.StatusOK)
	c.expectError(http.MethodPost, "/sessions/"+newer+"/inputs", `{"content":"Hello?"}`, c.token, http.StatusConflict, "AGENT_RUNTIME_ERROR")
	assert.Empty(t, c.listIDs("/sessions?archived=true"))
	c.dev.interrupt(t)
	c.setup.assertStopped(t)
}

// startRoutesStack starts `astrabox dev` with real local boxes running the
// pinned Claude Code, and returns a client for the dev user, the seeded Agent's
// id and the stream validator.
func startRoutesStack(t *testing.T) (*apiClient, string, *uicheck.Validator) {
	t.Helper()
	return startRoutesStackFor(t, "AGENT_ID")
}

// startRoutesStackFor is startRoutesStack with the Agent dev.env names under agentVar
// (AGENT_ID_CODEX, ...), and extra environment for the platform.
func startRoutesStackFor(t *testing.T, agentVar string, extraEnv ...string) (*apiClient, string, *uicheck.Validator) {
	t.Helper()
	validator, err := uicheck.New()
	require.NoError(t, err, "run `make deps-npm`")
	stack := newDevSetup(t)
	env := append(stack.env, extraEnv...)
	dev := startProcess(t, stack.bin, env, "dev")
	vars := waitForDevEnv(t, dev, stack.envFile)
	c := &apiClient{t: t, base: vars["SERVICE_URL"] + "/api/v1", token: vars["ACCESS_TOKEN"], dev: dev, setup: stack}
	require.NotEmpty(t, vars[agentVar], "dev.env names %s", agentVar)
	return c, vars[agentVar], validator
}

// devSetup is what one `astrabox dev` of a test runs with: its binary, its
// environment (free ports, its own data folder, real local boxes in a state
// folder of the test's own) and where it writes dev.env.
type devSetup struct {
	bin      string
	env      []string
	ports    []int // api, postgres, temporal, temporal ui, model
	dataDir  string
	envFile  string
	boxState string
}

func newDevSetup(t *testing.T) devSetup {
	t.Helper()
	boxes := localtest.Options(t)
	bin := buildAstrabox(t)
	dataDir := t.TempDir()
	// The managed cluster runs as the postgres account, which must be able to
	// reach its data folder through the test's private temporary folders.
	require.NoError(t, os.Chmod(dataDir, 0o711))
	require.NoError(t, os.Chmod(filepath.Dir(dataDir), 0o711))
	ports := freePorts(t, 5)
	env := append(os.Environ(),
		"ASTRABOX_DEV_DATA_DIR="+dataDir,
		"ASTRABOX_DEV_TEMPORAL_BIN="+temporalBinary(t),
		"ASTRABOX_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(ports[0]),
		"ASTRABOX_DEV_POSTGRES_PORT="+strconv.Itoa(ports[1]),
		"ASTRABOX_DEV_TEMPORAL_PORT="+strconv.Itoa(ports[2]),
		"ASTRABOX_DEV_TEMPORAL_UI_PORT="+strconv.Itoa(ports[3]),
		"ASTRABOX_DEV_MODEL_PORT="+strconv.Itoa(ports[4]),
		"ASTRABOX_SANDBOX_LOCAL_STATE_DIR="+boxes.StateDir,
		"ASTRABOX_SANDBOX_LOCAL_UID_BASE="+strconv.Itoa(boxes.UIDFirst),
		"ASTRABOX_SANDBOX_LOCAL_UID_COUNT="+strconv.Itoa(boxes.UIDCount),
		"ASTRABOX_SANDBOX_LOCAL_RUNNER_PATH="+boxes.RunnerPath,
		"ASTRABOX_STARTUP_TIMEOUT=60s",
	)
	return devSetup{bin: bin, env: env, ports: ports, dataDir: dataDir,
		envFile: filepath.Join(dataDir, "dev.env"), boxState: boxes.StateDir}
}

// assertStopped checks what Ctrl-C must leave: no port held, no PostgreSQL,
// no box process and no box folder.
func (d devSetup) assertStopped(t *testing.T) {
	t.Helper()
	for _, p := range d.ports {
		assert.NoError(t, portFree(p), "port %d still held after Ctrl-C", p)
	}
	_, err := os.Stat(filepath.Join(d.dataDir, "postgres", "data", "postmaster.pid"))
	assert.True(t, os.IsNotExist(err), "postgres left running")
	assert.Empty(t, boxProcesses(d.boxState), "box processes left running after Ctrl-C")
	left, _ := os.ReadDir(filepath.Join(d.boxState, "boxes"))
	assert.Empty(t, left, "box folders left after Ctrl-C")
}

// boxProcesses lists the processes whose command line names the box state
// folder: bubblewrap and each box's init do.
func boxProcesses(stateDir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(raw, []byte(stateDir+"/")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// envelope is any JSON answer of the API.
type envelope struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// send makes one request with the given bearer token ("" for none) and decodes
// the envelope after checking the status.
func (c *apiClient) send(method, path, body, token string, want int) envelope {
	c.t.Helper()
	saved := c.token
	c.token = token
	resp := c.request(method, path, body, "")
	c.token = saved
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: %s", method, path, raw)
	var env envelope
	require.NoError(c.t, json.Unmarshal(raw, &env), string(raw))
	return env
}

// expectError checks a refusal's status and product code.
func (c *apiClient) expectError(method, path, body, token string, status int, code string) {
	c.t.Helper()
	env := c.send(method, path, body, token, status)
	assert.Equal(c.t, code, env.Code, "%s %s: %s", method, path, env.Message)
}

// expectArray checks that a route answers a JSON array and returns it.
func (c *apiClient) expectArray(method, path string) []map[string]any {
	c.t.Helper()
	env := c.send(method, path, "", c.token, http.StatusOK)
	var out []map[string]any
	require.NoError(c.t, json.Unmarshal(env.Data, &out), "%s %s answers an array: %s", method, path, env.Data)
	return out
}

// listIDs returns the Session ids of an unpaged list, in order.
func (c *apiClient) listIDs(path string) []string {
	c.t.Helper()
	ids := []string{}
	for _, s := range c.expectArray(http.MethodGet, path) {
		ids = append(ids, s["session_id"].(string))
	}
	return ids
}

func summaryIDs(v any) []string {
	ids := []string{}
	list, _ := v.([]any)
	for _, s := range list {
		m, _ := s.(map[string]any)
		id, _ := m["session_id"].(string)
		ids = append(ids, id)
	}
	return ids
}

// readUntil reads the stream from after until done holds for the part types
// seen so far and the last finish reason, then closes it and validates what it
// read with the real client. It serves a stream that stays open, such as one
// paused on an approval.
func (c *apiClient) readUntil(v *uicheck.Validator, sessionID string, after int, done func(types map[string]bool, finish string) bool) streamed {
	c.t.Helper()
	resp := c.request(http.MethodGet, "/sessions/"+sessionID+"/stream?after_seq="+strconv.Itoa(after), "", "")
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	types := map[string]bool{}
	finish, last := "", after
	var raw bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		raw.WriteString(sc.Text() + "\n")
		var part struct {
			Type         string `json:"type"`
			FinishReason string `json:"finishReason"`
			Data         struct {
				Seq int `json:"seq"`
			} `json:"data"`
		}
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || json.Unmarshal([]byte(line), &part) != nil {
			continue
		}
		switch part.Type {
		case "data-resume-cursor":
			last = part.Data.Seq
		case "finish":
			finish = part.FinishReason
		}
		types[part.Type] = true
		if part.Type == "data-resume-cursor" && done(types, finish) {
			raw.WriteString("\ndata: [DONE]\n\n")
			report, err := v.SSE(context.Background(), raw.Bytes(), nil)
			require.NoError(c.t, err)
			require.NoError(c.t, report.Err(), "stream:\n%s", raw.Bytes())
			return streamed{report: report, lastSeq: last}
		}
	}
	c.t.Fatalf("the stream ended before the expected parts (seen %v, finish %q): %v\n%s", types, finish, sc.Err(), raw.Bytes())
	return streamed{}
}

// continueStream reads the stream from after to its [DONE] and validates it as
// the continuation of the assistant message the browser already holds.
func (c *apiClient) continueStream(v *uicheck.Validator, sessionID string, after int, held uicheck.UIMessage) streamed {
	c.t.Helper()
	resp := c.request(http.MethodGet, "/sessions/"+sessionID+"/stream?after_seq="+strconv.Itoa(after), "", "")
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err, "stream so far:\n%s", raw)
	continuation, err := json.Marshal(held)
	require.NoError(c.t, err)
	report, err := v.SSE(context.Background(), raw, continuation)
	require.NoError(c.t, err)
	require.NoError(c.t, report.Err(), "stream:\n%s", raw)
	require.True(c.t, report.Done, "the stream ends with [DONE]")
	return streamed{report: report}
}
