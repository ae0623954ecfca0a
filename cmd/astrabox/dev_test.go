package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/internal/uicheck"
)

// TestDevStack runs the real `astrabox dev` end to end: it comes up with a
// managed PostgreSQL and Temporal, answers /readyz, serves the Temporal UI,
// refuses a second instance, stops everything on Ctrl-C (its boxes included),
// and reuses its data on the next start, where a Session whose box was stopped
// answers its next message on a new box.
func TestDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, Temporal and boxes")
	}
	setup := newDevSetup(t)
	validator, err := uicheck.New()
	require.NoError(t, err, "run `make deps-npm`")
	ports := setup.ports

	first := startProcess(t, setup.bin, setup.env, "dev")
	vars := waitForDevEnv(t, first, setup.envFile)
	require.Equal(t, "http://127.0.0.1:"+strconv.Itoa(ports[0]), vars["SERVICE_URL"])
	require.NotEmpty(t, vars["ACCESS_TOKEN"])
	require.NotEmpty(t, vars["AGENT_ID"])
	// One Agent per built-in program; AGENT_ID stays the Claude Code one.
	require.Equal(t, vars["AGENT_ID"], vars["AGENT_ID_CLAUDE_CODE"])
	require.NotEmpty(t, vars["AGENT_ID_CODEX"])
	require.NotEqual(t, vars["AGENT_ID"], vars["AGENT_ID_CODEX"])
	require.NotEmpty(t, vars["AGENT_ID_PI"])
	require.NotEqual(t, vars["AGENT_ID_CODEX"], vars["AGENT_ID_PI"])
	waitHTTP(t, first, vars["SERVICE_URL"]+"/readyz", http.StatusOK)
	waitHTTP(t, first, fmt.Sprintf("http://127.0.0.1:%d/", ports[3]), http.StatusOK)
	// With no model credentials the scripted model server stands in.
	waitHTTP(t, first, fmt.Sprintf("http://127.0.0.1:%d/", ports[4]), http.StatusOK)

	// An Agent's secret value is sealed under the key the dev stack generated.
	var seeded struct {
		RuntimeProfileID string `json:"runtime_profile_id"`
	}
	devAPI(t, "GET", vars["SERVICE_URL"]+"/api/v1/agents/"+vars["AGENT_ID"], vars["ACCESS_TOKEN"], nil, &seeded)
	var secretive struct {
		AgentID string          `json:"agent_id"`
		Version int64           `json:"version"`
		Config  json.RawMessage `json:"config"`
	}
	devAPI(t, "POST", vars["SERVICE_URL"]+"/api/v1/agents", vars["ACCESS_TOKEN"], map[string]any{
		"name": "secretive", "runtime_profile_id": seeded.RuntimeProfileID,
		"config": map[string]any{"mcp_servers": []any{map[string]any{"name": "git", "transport": "stdio", "command": []string{"git-mcp"}, "env": map[string]string{"TOKEN": "dev-secret"}}}},
	}, &secretive)
	assert.NotContains(t, string(secretive.Config), "dev-secret")
	key, err := os.ReadFile(filepath.Join(setup.dataDir, devSecretsKeyFile))
	require.NoError(t, err)

	// A second dev stack on the same data folder is refused without damage.
	second := exec.Command(setup.bin, "dev")
	second.Env = setup.env
	out, err := second.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "already running")

	// A conversation leaves its box running until Ctrl-C.
	c := &apiClient{t: t, base: vars["SERVICE_URL"] + "/api/v1", token: vars["ACCESS_TOKEN"], dev: first, setup: setup}
	sessionID := c.call(http.MethodPost, "/agents/"+vars["AGENT_ID"]+"/conversations", `{}`, "devstack", http.StatusOK)["session_id"].(string)
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs", `{"content":"Say hello.","client_message_id":"before-restart"}`, "", http.StatusOK)
	before := c.stream(validator, sessionID, 0)
	require.NotEmpty(t, boxProcesses(setup.boxState), "the conversation runs in a box")

	first.interrupt(t)
	setup.assertStopped(t)

	// The next start reuses the data: the same Agent and a still-valid token.
	again := startProcess(t, setup.bin, setup.env, "dev")
	revisited := waitForDevEnv(t, again, setup.envFile)
	assert.Equal(t, vars["AGENT_ID"], revisited["AGENT_ID"])
	assert.Equal(t, vars["AGENT_ID_CODEX"], revisited["AGENT_ID_CODEX"])
	assert.Equal(t, vars["AGENT_ID_PI"], revisited["AGENT_ID_PI"])
	assert.Equal(t, vars["ACCESS_TOKEN"], revisited["ACCESS_TOKEN"])
	waitHTTP(t, again, revisited["SERVICE_URL"]+"/readyz", http.StatusOK)
	// The same key opens the sealed value: the marker sent back keeps it.
	keyAgain, err := os.ReadFile(filepath.Join(setup.dataDir, devSecretsKeyFile))
	require.NoError(t, err)
	assert.Equal(t, key, keyAgain)
	devAPI(t, "PATCH", revisited["SERVICE_URL"]+"/api/v1/agents/"+secretive.AgentID, revisited["ACCESS_TOKEN"],
		map[string]any{"version": secretive.Version, "config": secretive.Config}, nil)

	// Its box was stopped with the stack: the next message resumes the
	// conversation on a new box.
	c.dev = again
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs", `{"content":"Say hello again.","client_message_id":"after-restart"}`, "", http.StatusOK)
	after := c.stream(validator, sessionID, before.lastSeq)
	require.Len(t, after.report.Messages, 1)
	assert.Contains(t, messageText(after.report.Messages[0]), "Say hello again.")
	again.interrupt(t)
	setup.assertStopped(t)
}

// devAPI calls the dev stack's API and decodes the success envelope's data into out.
func devAPI(t *testing.T, method, url, token string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, url, raw)
	if out != nil {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(raw, &env))
		require.NoError(t, json.Unmarshal(env.Data, out))
	}
}

type devProcess struct {
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
}

// startProcess starts the binary with args and interrupts it, if still
// running, when the test ends.
func startProcess(t *testing.T, bin string, env []string, args ...string) *devProcess {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	require.NoError(t, cmd.Start())
	p := &devProcess{cmd: cmd, output: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGINT)
			<-p.exited
		}
	})
	return p
}

func (p *devProcess) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("astrabox dev did not stop on SIGINT; output:\n%s", p.output)
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "output:\n%s", p.output)
}

// waitForDevEnv waits for dev.env to name every variable the documents use.
func waitForDevEnv(t *testing.T, p *devProcess, path string) map[string]string {
	t.Helper()
	var vars map[string]string
	p.waitUntil(t, 3*time.Minute, "dev.env and the banner", func() bool {
		vars = parseEnv(path)
		return vars["SERVICE_URL"] != "" && vars["ACCESS_TOKEN"] != "" && vars["AGENT_ID"] != "" &&
			strings.Contains(p.output.String(), "AstraBox is running")
	})
	return vars
}

// waitUntil polls cond until it holds, failing at once if the process exits.
// Polling is the only way to watch another process's files and ports.
func (p *devProcess) waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-p.exited:
			t.Fatalf("astrabox dev exited while waiting for %s:\n%s", what, p.output)
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; output:\n%s", what, p.output)
		case <-tick.C:
		}
	}
}

func parseEnv(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out
}

func waitHTTP(t *testing.T, p *devProcess, url string, want int) {
	t.Helper()
	p.waitUntil(t, time.Minute, url+" to answer "+strconv.Itoa(want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == want
	})
}

func buildAstrabox(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "astrabox")
	build := exec.Command("go", "build", "-o", out, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	msg, err := build.CombinedOutput()
	require.NoError(t, err, "build astrabox: %s", msg)
	return out
}

func temporalBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("ASTRABOX_TEMPORAL_BIN")
	if path == "" {
		path = filepath.Join("..", "..", "bin", "temporal")
	}
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	_, err = os.Stat(abs)
	require.NoError(t, err, "the Temporal CLI is missing: run `make deps`")
	return abs
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := freeport.ReserveN(n)
	require.NoError(t, err)
	return ports
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return ln.Close()
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
