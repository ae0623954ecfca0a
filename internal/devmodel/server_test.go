package devmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// sseFrame is one parsed server-sent event.
type sseFrame struct {
	event string
	data  string
}

// readSSE parses a whole event stream strictly: every frame is `event:` (when
// present) then one `data:` line then a blank line, and nothing else.
func readSSE(t *testing.T, resp *http.Response) []sseFrame {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	var frames []sseFrame
	var cur sseFrame
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			require.NotEmpty(t, cur.data, "a frame carries data")
			frames = append(frames, cur)
			cur = sseFrame{}
		case strings.HasPrefix(line, "event: "):
			require.Empty(t, cur.event)
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.Empty(t, cur.data, "one data line per frame")
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected line in event stream: %q", line)
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, cur.data, "the stream ends on a frame boundary")
	return frames
}

func post(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func frameType(t *testing.T, f sseFrame) string {
	t.Helper()
	var v struct {
		Type string `json:"type"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.data), &v), f.data)
	return v.Type
}

func TestAnthropicEventSequenceIsExact(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := post(t, srv.URL()+"/v1/messages?beta=true",
		`{"model":"claude-opus-5-5","max_tokens":10,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],
		  "messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>ignore me</system-reminder>"},{"type":"text","text":"[[script:bash cmd=ls think=hmm]]"}]},
		              {"role":"system","content":"context the program adds"}]}`,
		map[string]string{"x-api-key": "sk-ant-placeholder", "anthropic-version": "2023-06-01"})
	var got []string
	for _, f := range readSSE(t, resp) {
		typ := frameType(t, f)
		require.Equal(t, f.event, typ, "the event name repeats the data type")
		got = append(got, typ)
	}
	require.Equal(t, []string{
		"message_start",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", // thinking + signature
		"ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // tool_use
		"message_delta", "message_stop",
	}, got)
}

func TestResponsesEventNamesMatchTypes(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := post(t, srv.URL()+"/v1/responses",
		`{"model":"stub-model","stream":true,"input":[{"type":"message","role":"developer","content":"rules"},{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
		map[string]string{"Authorization": "Bearer sk-stub"})
	frames := readSSE(t, resp)
	for _, f := range frames {
		require.Equal(t, f.event, frameType(t, f))
	}
	require.Equal(t, "response.created", frames[0].event)
	require.Equal(t, "response.completed", frames[len(frames)-1].event)
	require.Contains(t, frames[len(frames)-1].data, `"text":"Scripted reply to: hi","type":"output_text"`)
}

func TestChatStreamEndsWithDone(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := post(t, srv.URL()+"/v1/chat/completions",
		`{"model":"stub-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer sk-stub"})
	frames := readSSE(t, resp)
	require.Equal(t, "[DONE]", frames[len(frames)-1].data)
	for _, f := range frames {
		require.Empty(t, f.event, "chat completion chunks have no event names")
	}
	require.NotContains(t, frames[len(frames)-2].data, `"usage"`, "no usage chunk unless include_usage asks for one")
}

func TestServesOnAUnixSocket(t *testing.T) {
	t.Parallel()
	srv := devmodel.New(devmodel.Options{})
	sock := filepath.Join(t.TempDir(), "model.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://model/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"over a socket"}]}`))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "k")
	resp, err := client.Do(req)
	require.NoError(t, err)
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "Scripted reply to: over a socket", msg.Content[0].Text)
	require.NoError(t, srv.Close())
	require.NoError(t, <-served)
}

func TestStartRefusesNonLoopbackAddresses(t *testing.T) {
	t.Parallel()
	srv := devmodel.New(devmodel.Options{})
	defer srv.Close()
	require.ErrorContains(t, srv.Start(t.Context(), "0.0.0.0:0"), "not a loopback address")
	require.ErrorContains(t, srv.Start(t.Context(), ":0"), "not a loopback address")
}

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- devmodel.Run(ctx, devmodel.Options{Addr: "127.0.0.1:0", OnListening: func(url string) { listening <- url }})
	}()
	var url string
	select {
	case url = <-listening:
	case err := <-done:
		t.Fatalf("run ended before listening: %v", err)
	}
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	require.NoError(t, <-done)
	_, err = http.Get(url + "/v1/models")
	require.Error(t, err, "the server is gone once the context ends")
}

func TestSideRequestsAndProbesGetShortAnswers(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := post(t, srv.URL()+"/v1/messages",
		`{"model":"claude-haiku-4-5","max_tokens":50,"messages":[{"role":"user","content":"[[script:error status=500]] write a title"}]}`,
		map[string]string{"x-api-key": "k"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, srv.URL()+"/api/hello", nil)
	require.NoError(t, err)
	head, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, head.Body.Close())
	require.Equal(t, http.StatusOK, head.StatusCode)
	reqs := srv.Requests()
	require.Equal(t, devmodel.ScriptSide, reqs[0].Script)
	require.Equal(t, devmodel.APIOther, reqs[1].API)
}
