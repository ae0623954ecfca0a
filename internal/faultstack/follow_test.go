package faultstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeStream serves a Session's stream from a fixed list of parts (seq i+1 is
// parts[i]); cutAfter ends the first connection after that many parts without
// [DONE], and seqs overrides the seq a part carries, to fake a broken log.
type fakeStream struct {
	parts    []string
	cutAfter int
	seqs     map[int]int64

	mu     sync.Mutex
	afters []int64
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after_seq"), 10, 64)
	f.mu.Lock()
	f.afters = append(f.afters, after)
	first := len(f.afters) == 1
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	for i := int(after); i < len(f.parts); i++ {
		if first && f.cutAfter > 0 && i == f.cutAfter {
			// A part without its cursor, then the connection drops.
			fmt.Fprintf(w, "data: %s\n\n", f.parts[i])
			return
		}
		seq := int64(i + 1)
		if s, ok := f.seqs[i]; ok {
			seq = s
		}
		fmt.Fprintf(w, "data: %s\n\ndata: {\"type\":\"data-resume-cursor\",\"data\":{\"seq\":%d},\"transient\":true}\n\n", f.parts[i], seq)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

var replyParts = []string{
	`{"type":"start","messageId":"r1"}`,
	`{"type":"text-start","id":"t1"}`,
	`{"type":"text-delta","id":"t1","delta":"Hello "}`,
	`{"type":"text-delta","id":"t1","delta":"world."}`,
	`{"type":"text-end","id":"t1"}`,
	`{"type":"finish"}`,
}

func followFake(t *testing.T, f *fakeStream) (Transcript, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return NewClient(srv.URL, "token").Follow(ctx, "s1", 0, FollowOptions{})
}

func TestFollowResumesACutStreamFromItsLastSeq(t *testing.T) {
	t.Parallel()
	f := &fakeStream{parts: replyParts, cutAfter: 3}
	tr, err := followFake(t, f)
	require.NoError(t, err)
	assert.True(t, tr.Done)
	assert.Equal(t, 1, tr.Reconnects)
	assert.Equal(t, []int64{0, 3}, f.afters, "resumed after the last part whose cursor arrived")
	assert.Equal(t, []string{"start", "text-start", "text-delta", "text-delta", "text-end", "finish"}, tr.Types())
	for i, p := range tr.Parts {
		assert.Equal(t, int64(i+1), p.Seq)
	}
	// The joined stream is what one uninterrupted reader would have parsed.
	k, err := NewChecker()
	require.NoError(t, err, "run `make deps-npm`")
	msg, err := k.Reply(t.Context(), tr)
	require.NoError(t, err)
	assert.Equal(t, "Hello world.", Text(msg))
}

func TestFollowFailsOnARepeatedOrMissingSeq(t *testing.T) {
	t.Parallel()
	for name, seqs := range map[string]map[int]int64{
		"repeated": {3: 3},
		"missing":  {3: 5},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := followFake(t, &fakeStream{parts: replyParts, seqs: seqs})
			assert.True(t, errors.Is(err, ErrSequence), "got %v", err)
		})
	}
}
