package api

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// partReadTimeout bounds one shared read of the output log: it runs on behalf of
// every stream waiting on it, so no one stream's cancellation may end it.
const partReadTimeout = 30 * time.Second

// streamedPart is a stored part as every stream sends it: its SSE event and its
// resume cursor's, encoded once, and what ends a stream.
type streamedPart struct {
	seq int64
	sse []byte
	// finishes reports a part that finishes a response; typ is the frame's type.
	finishes bool
	typ      string
}

// sharedParts is the output log's parts after a seq, read once for every stream of
// this process that waits at that seq: the streams of one Session wake on the same
// notification at the same cursor, and share one query and one encoding of each part
// instead of each doing its own. err, when set, follows the parts that encoded.
type sharedParts struct {
	parts []streamedPart
	err   error
}

// partsAfter returns the encoded parts after seq (up to streamBatch). It joins a
// read of the same Session at the same seq that another stream started at or after
// notBefore (when this stream learned of new parts), so the shared read sees every
// part this stream was told of; otherwise it starts one that later streams join.
func (s *Server) partsAfter(ctx context.Context, sessionID string, after int64, notBefore time.Time) (sharedParts, error) {
	c := s.partReads.join(sessionID+"/"+strconv.FormatInt(after, 10), notBefore, func(started *partRead) {
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partReadTimeout)
		defer cancel()
		rows, err := s.store.ListOutputPartsAfter(readCtx, sessionID, after, streamBatch)
		if err != nil {
			started.err = err
			return
		}
		started.res = encodeParts(rows)
	})
	select {
	case <-ctx.Done():
		return sharedParts{}, ctx.Err()
	case <-c.done:
		return c.res, c.err
	}
}

// noticedParts encodes the frames a notification carried (pubsub.OutputNotice), once
// for every stream of this process the notification reached.
func (s *Server) noticedParts(sessionID string, n pubsub.OutputNotice) sharedParts {
	return n.Derived(func(n pubsub.OutputNotice) any {
		rows := make([]store.OutputPart, len(n.Frames))
		for i, frame := range n.Frames {
			rows[i] = store.OutputPart{SessionID: sessionID, Seq: n.FirstSeq() + int64(i), Frame: frame}
		}
		return encodeParts(rows)
	}).(sharedParts)
}

// partReads coalesces the concurrent reads of the output log at one Session and seq.
type partReads struct {
	mu    sync.Mutex
	reads map[string]*partRead
}

// partRead is one read in flight or done; res and err are set before done closes.
type partRead struct {
	started time.Time
	done    chan struct{}
	res     sharedParts
	err     error
}

// join returns the read of key started at or after notBefore, starting one with run
// when there is none.
func (r *partReads) join(key string, notBefore time.Time, run func(*partRead)) *partRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.reads[key]; ok && !c.started.Before(notBefore) {
		return c
	}
	if r.reads == nil {
		r.reads = map[string]*partRead{}
	}
	c := &partRead{started: time.Now(), done: make(chan struct{})}
	r.reads[key] = c
	go func() {
		run(c)
		r.mu.Lock()
		if r.reads[key] == c {
			delete(r.reads, key)
		}
		r.mu.Unlock()
		close(c.done)
	}()
	return c
}

// encodeParts writes each part as the stream sends it: the frame in its canonical
// encoding (a stored jsonb frame comes back with its keys reordered), then its resume
// cursor.
func encodeParts(rows []store.OutputPart) sharedParts {
	out := sharedParts{parts: make([]streamedPart, 0, len(rows))}
	for _, p := range rows {
		raw, typ, err := engines.CanonicalFrameJSON(p.Frame)
		if err != nil {
			out.err = fmt.Errorf("output part %d: %w", p.Seq, err)
			return out
		}
		finishes := false
		if typ == "finish" { // once per reply: whether it ends the response needs its reason
			frame, err := engines.ParseFrame(p.Frame)
			if err != nil {
				out.err = fmt.Errorf("output part %d: %w", p.Seq, err)
				return out
			}
			finishes = engines.FinishesResponse(frame)
		}
		sse := make([]byte, 0, len(raw)+96)
		sse = append(sse, "data: "...)
		sse = append(sse, raw...)
		sse = append(sse, "\n\ndata: "...)
		sse = engines.AppendResumeCursorJSON(sse, p.Seq)
		sse = append(sse, "\n\n"...)
		out.parts = append(out.parts, streamedPart{seq: p.Seq, sse: sse, finishes: finishes, typ: typ})
	}
	return out
}
