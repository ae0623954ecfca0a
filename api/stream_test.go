package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// relay stands in for the orchestration's Relay: it holds the reader lease and appends
// parts as the Relay will.
type relay struct {
	f         *fixture
	sessionID string
	lease     int64
}

func (f *fixture) relay(sessionID string) *relay {
	f.t.Helper()
	l, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: sessionID, Holder: "test-relay", TTL: time.Minute})
	require.NoError(f.t, err)
	return &relay{f: f, sessionID: sessionID, lease: l.Generation}
}

// append writes frames of responseID ("" for none) and returns the last seq.
func (r *relay) append(responseID string, frames ...engines.Frame) int64 {
	r.f.t.Helper()
	parts := make([]store.NewPart, len(frames))
	for i, fr := range frames {
		raw, err := fr.MarshalJSON()
		require.NoError(r.f.t, err)
		parts[i] = store.NewPart{Frame: raw}
		if responseID != "" {
			id := responseID
			parts[i].ResponseID = &id
		}
	}
	res, err := r.f.st.AppendParts(r.f.ctx, store.AppendRequest{SessionID: r.sessionID, LeaseGeneration: r.lease, Parts: parts})
	require.NoError(r.f.t, err)
	return res.LastSeq
}

// textResponse is a complete response saying text.
func textResponse(responseID, text string, outcome engines.ResponseOutcome) []engines.Frame {
	frames := []engines.Frame{
		engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: responseID, InputIDs: []string{"in-1"}, Origin: engines.OriginInput}),
		engines.MustFrame(engines.StartStepChunk{}),
		engines.MustFrame(engines.TextStartChunk{ID: responseID + "-t"}),
	}
	for _, word := range strings.SplitAfter(text, " ") {
		frames = append(frames, engines.MustFrame(engines.TextDeltaChunk{ID: responseID + "-t", Delta: word}))
	}
	frames = append(frames, engines.MustFrame(engines.TextEndChunk{ID: responseID + "-t"}), engines.MustFrame(engines.FinishStepChunk{}))
	return append(frames, engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: responseID, Outcome: outcome, NativeReason: "end_turn"})...)
}

// openStream starts a stream request and returns its response once headers arrived:
// the follower has subscribed by then.
func (f *fixture) openStream(ctx context.Context, sessionID, query, token string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/v1/sessions/"+sessionID+"/stream"+query, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseData splits a stream body into its data payloads.
func sseData(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	for _, event := range strings.Split(string(body), "\n\n") {
		if data, ok := strings.CutPrefix(event, "data: "); ok {
			out = append(out, data)
		}
	}
	return out
}

// checkStream asserts the stream's shape: every part followed by a resume cursor whose
// seq counts up from after, then [DONE]; it returns the parts without the cursors.
func checkStream(t testing.TB, body []byte, after int64) []map[string]any {
	t.Helper()
	data := sseData(t, body)
	require.NotEmpty(t, data)
	require.Equal(t, "[DONE]", data[len(data)-1])
	data = data[:len(data)-1]
	require.Zero(t, len(data)%2, "every part has its cursor")
	var parts []map[string]any
	for i := 0; i < len(data); i += 2 {
		var part, cursor map[string]any
		require.NoError(t, json.Unmarshal([]byte(data[i]), &part))
		require.NoError(t, json.Unmarshal([]byte(data[i+1]), &cursor))
		require.Equal(t, "data-resume-cursor", cursor["type"])
		seq := cursor["data"].(map[string]any)["seq"].(float64)
		require.Equal(t, float64(after+int64(i/2)+1), seq, "cursor after part %d", i/2)
		parts = append(parts, part)
	}
	return parts
}

func validateSSE(t testing.TB, body []byte) uicheck.Report {
	t.Helper()
	v, err := uicheck.New()
	require.NoError(t, err)
	report, err := v.SSE(t.Context(), body, nil)
	require.NoError(t, err)
	require.NoError(t, report.Err(), "the ai client rejects the stream:\n%s", body)
	require.True(t, report.Done)
	return report
}

func TestStreamReplaysTheBacklogAndEndsAfterTheFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	first := r.append("r-1", textResponse("r-1", "Hello there, world", engines.OutcomeCompleted)...)
	r.append("r-2", textResponse("r-2", "Second answer", engines.OutcomeCompleted)...)

	resp := f.openStream(f.ctx, id, "?after_seq=0", f.member)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "v1", resp.Header.Get("x-vercel-ai-ui-message-stream"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parts := checkStream(t, body, 0)
	assert.Len(t, parts, int(first), "one response per stream request")
	assert.Equal(t, "finish", parts[len(parts)-1]["type"])
	report := validateSSE(t, body)
	require.Len(t, report.Messages, 1)
	assert.Equal(t, "r-1", report.Messages[0].ID)
	text := report.Messages[0].PartsOfType("text")
	require.Len(t, text, 1)
	assert.Equal(t, "Hello there, world", text[0]["text"])

	// The next request, from the saved cursor, reads the following response.
	body, err = io.ReadAll(f.openStream(f.ctx, id, "?after_seq="+itoa(first), f.member).Body)
	require.NoError(t, err)
	checkStream(t, body, first)
	report = validateSSE(t, body)
	assert.Equal(t, "r-2", report.Messages[0].ID)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestStreamFollowsLiveOutputForManyFollowers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	frames := textResponse("r-live", "one two three four five six", engines.OutcomeCompleted)
	// An interaction segment's finish (tool-calls) does not end the stream.
	segment := []engines.Frame{
		engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "call-1", ToolName: "Bash", Input: json.RawMessage(`{"cmd":"ls"}`), Dynamic: true}),
	}
	seg, err := engines.InteractionSegmentFrames("r-live", "int-1", engines.ToolApprovalContract(engines.NativeRequest{Type: "permission", ID: "n-1"}, "call-1", "Bash", json.RawMessage(`{"cmd":"ls"}`)))
	require.NoError(t, err)
	segment = append(segment, seg...)
	all := append(append(append([]engines.Frame{}, frames[:2]...), segment...), frames[0])
	all = append(all, engines.ToolApprovalResponseFrame("int-1", true, ""),
		engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: "call-1", Output: json.RawMessage(`"ok"`)}))
	all = append(all, frames[2:]...)

	const followers = 5
	bodies := make([][]byte, followers)
	var wg sync.WaitGroup
	for i := range followers {
		resp := f.openStream(f.ctx, id, "?after_seq=0", f.member)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		wg.Go(func() {
			b, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			bodies[i] = b
		})
	}
	// Committed in several transactions while the followers wait.
	for i := 0; i < len(all); i += 3 {
		r.append("r-live", all[i:min(i+3, len(all))]...)
	}
	wg.Wait()
	for _, body := range bodies {
		parts := checkStream(t, body, 0)
		assert.Len(t, parts, len(all), "every follower gets every part once")
		report := validateSSE(t, body)
		require.Len(t, report.Messages, 1)
		tools := report.Messages[0].PartsOfType("dynamic-tool")
		require.Len(t, tools, 1)
		assert.Equal(t, "output-available", tools[0]["state"])
	}
}

func TestStreamReportsARefusedInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	resp := f.openStream(f.ctx, id, "", f.member)
	r.append("", engines.InputFailedFrame("in-9", "INPUT_REFUSED", "the program refused the message"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parts := checkStream(t, body, 0)
	require.Len(t, parts, 1)
	assert.Equal(t, "data-input-failed", parts[0]["type"])
	report := validateSSE(t, body)
	require.Len(t, report.Messages, 1)
	failed := report.Messages[0].PartsOfType("data-input-failed")
	require.Len(t, failed, 1)
	assert.Equal(t, "in-9", failed[0]["data"].(map[string]any)["input_id"])
}

func TestStreamKeepsAliveAndRereadsAfterADroppedListener(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.KeepAlive = 20 * time.Millisecond })
	id := f.newSession(f.member)
	r := f.relay(id)
	resp := f.openStream(f.ctx, id, "?after_seq=0", f.member)
	reader := bufio.NewReader(resp.Body)
	line, err := reader.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, ": keep-alive\n", line, "an idle stream sends comments")

	// Drop the listener's connection and commit while it is down: the notification is
	// lost, and the follower must find the parts by re-reading after the reconnect.
	f.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'astrabox-listener' AND datname = current_database()`)
	r.append("r-1", textResponse("r-1", "after the drop", engines.OutcomeCompleted)...)
	rest, err := io.ReadAll(reader)
	require.NoError(t, err)
	var events []string
	for _, e := range strings.Split(string(rest), "\n\n") {
		if e = strings.TrimLeft(e, "\n"); e != "" && !strings.HasPrefix(e, ":") {
			events = append(events, e+"\n\n")
		}
	}
	body := []byte(strings.Join(events, ""))
	checkStream(t, body, 0)
	validateSSE(t, body)
}

func TestStreamRefusesBadCursorsAndStrangers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	for _, q := range []string{"?after_seq=-1", "?after_seq=abc", "?after_seq=5", "?after=3"} {
		f.call("GET", "/api/v1/sessions/"+id+"/stream"+q, f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest)
	}
	f.call("GET", "/api/v1/sessions/"+id+"/stream", f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/sessions/"+id+"/stream", "", nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)

	// A stream subscribes before it reads its Session: a refused one leaves no channel
	// listened to, so no caller keeps the listener on channels at will.
	unseen := f.newSession(f.member)
	missing := "00000000-0000-0000-0000-0000000000ff"
	f.call("GET", "/api/v1/sessions/"+unseen+"/stream", f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/sessions/"+missing+"/stream", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
	listener := f.opts.Output.(*pubsub.Listener)
	require.Eventually(t, func() bool {
		listening := listener.Listening()
		return !slices.Contains(listening, pubsub.SessionOutputChannel(unseen)) && !slices.Contains(listening, pubsub.SessionOutputChannel(missing))
	}, 30*time.Second, 10*time.Millisecond, "a refused stream's channel is unlistened")
	require.Contains(t, listener.Listening(), pubsub.SessionOutputChannel(id), "an allowed stream's channel lingers")
}

// TestStreamSendsNoticedPartsAsALogReadWould: parts a Relay commits alone come with
// their notification, and a live follower sends them without reading them back, byte
// for byte as a follower that reads them from the log (parts appended in a
// transaction are announced by seq alone).
func TestStreamSendsNoticedPartsAsALogReadWould(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	noticed, read := f.newSession(f.member), f.newSession(f.member)
	frames := textResponse("r-1", "one two three four five six seven", engines.OutcomeCompleted)
	// A nested object whose keys jsonb reorders.
	frames = append(frames[:3:3], append([]engines.Frame{engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "call-1", ToolName: "Bash",
		Input: json.RawMessage(`{"zz":"z","a":"\u00e9"}`), Dynamic: true})}, frames[3:]...)...)
	follow := func(id string) <-chan []byte {
		resp := f.openStream(f.ctx, id, "?after_seq=0", f.member)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		out := make(chan []byte, 1)
		go func() {
			b, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			out <- b
		}()
		return out
	}
	before := f.catchUps(t)
	arrived, noticedBody := followLive(t, f.openStream(f.ctx, noticed, "?after_seq=0", f.member), len(frames))
	readBody := follow(read)
	// Each commit waits for the one before to reach the stream: a notice then always
	// continues the stream's cursor (a stream that fell behind reads the log, and a
	// later notice it already read past is dropped).
	waitParts := func(n int) {
		t.Helper()
		for got := range arrived {
			if got >= n {
				return
			}
		}
		t.Fatalf("the stream ended before part %d", n)
	}

	relayed := f.relay(noticed)
	head, body, tail := frames[:1], frames[1:len(frames)-2], frames[len(frames)-2:]
	relayed.append("r-1", head...) // a response's start comes in a transaction
	waitParts(len(head))
	for i := range body {
		relayed.partsOnly("r-1", body[i])
		waitParts(len(head) + i + 1)
	}
	relayed.append("r-1", tail...)
	appended := f.relay(read)
	for i := range frames {
		appended.append("r-1", frames[i])
	}

	got, want := <-noticedBody, <-readBody
	require.Len(t, checkStream(t, got, 0), len(frames), "every part once, in order")
	validateSSE(t, got)
	require.Equal(t, string(want), string(got), "a noticed part is sent as a read of the log sends it")
	after := f.catchUps(t)
	// The other stream may take some of its parts from notices too.
	assert.GreaterOrEqual(t, after["notice"]-before["notice"], float64(len(body)), "the lone parts reached the stream from their notifications: %v", after)
}

// followLive reads a stream as it arrives: the number of parts received so far is
// sent on arrived after each part's cursor, and the whole body on body at its end.
func followLive(t *testing.T, resp *http.Response, parts int) (arrived <-chan int, body <-chan []byte) {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	counts, all := make(chan int, parts+1), make(chan []byte, 1)
	go func() {
		defer resp.Body.Close()
		defer close(counts)
		var buf bytes.Buffer
		br := bufio.NewReader(resp.Body)
		data := 0
		for {
			line, err := br.ReadBytes('\n')
			buf.Write(line)
			if bytes.HasPrefix(line, []byte("data: ")) && !bytes.HasPrefix(line, []byte("data: [DONE]")) {
				if data++; data%2 == 0 { // a part and its cursor
					counts <- data / 2
				}
			}
			if err != nil {
				assert.ErrorIs(t, err, io.EOF)
				all <- buf.Bytes()
				return
			}
		}
	}()
	return counts, all
}

// partsOnly commits frames as the Relay commits a batch of parts alone.
func (r *relay) partsOnly(responseID string, frames ...engines.Frame) {
	r.f.t.Helper()
	ops := make([]store.RelayOp, len(frames))
	for i, fr := range frames {
		raw, err := fr.MarshalJSON()
		require.NoError(r.f.t, err)
		ops[i] = store.RelayOp{Part: &store.NewPart{ResponseID: &responseID, Frame: raw}}
	}
	_, err := r.f.st.ApplyRelayBatch(r.f.ctx, store.RelayBatch{SessionID: r.sessionID, LeaseGeneration: r.lease, Ops: ops})
	require.NoError(r.f.t, err)
}

// catchUps reads the server's stream catch-up counter by source from /metrics.
func (f *fixture) catchUps(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(f.srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		for _, source := range []string{"notice", "log"} {
			if v, ok := strings.CutPrefix(line, `astrabox_stream_catchups_total{source="`+source+`"} `); ok {
				n, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				out[source] = n
			}
		}
	}
	require.Len(t, out, 2, "both sources are reported:\n%s", raw)
	return out
}
