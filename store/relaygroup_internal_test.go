package store

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAGroupWritesEveryBatchOnceWithBoundedWriters: Relays committing at once, each
// many batches one after another, are written by at most the group's writers at a
// time, each batch once and with its own result; when all have returned, no writer
// is left counted, so the next batch is written at once.
func TestAGroupWritesEveryBatchOnceWithBoundedWriters(t *testing.T) {
	const relays, batches = 40, 25
	var writing, most, groups atomic.Int64
	var mu sync.Mutex
	written := map[string]int{}
	g := &relayGroup{writers: 2, write: func(_ context.Context, group []*relayCommit) {
		now := writing.Add(1)
		defer writing.Add(-1)
		for {
			seen := most.Load()
			if now <= seen || most.CompareAndSwap(seen, now) {
				break
			}
		}
		groups.Add(1)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range group {
			written[fmt.Sprintf("%s/%d", c.batch.SessionID, c.batch.LeaseGeneration)]++
			c.res = AppendResult{LastSeq: c.batch.LeaseGeneration}
		}
	}}
	var wg sync.WaitGroup
	for r := range relays {
		wg.Go(func() {
			for b := range batches {
				res, err := g.commit(t.Context(), &relayCommit{batch: RelayBatch{SessionID: fmt.Sprint(r), LeaseGeneration: int64(b)}})
				if err != nil || res.LastSeq != int64(b) {
					t.Errorf("relay %d batch %d: got %+v, %v", r, b, res, err)
				}
			}
		})
	}
	wg.Wait()
	if len(written) != relays*batches {
		t.Fatalf("%d batches written, want %d", len(written), relays*batches)
	}
	for key, n := range written {
		if n != 1 {
			t.Errorf("batch %s written %d times", key, n)
		}
	}
	if most.Load() > 2 {
		t.Errorf("%d groups written at once, at most 2 allowed", most.Load())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running != 0 || len(g.pending) != 0 {
		t.Errorf("after every commit returned: %d writing, %d pending", g.running, len(g.pending))
	}
	t.Logf("%d batches in %d groups", relays*batches, groups.Load())
}

// TestALoneBatchIsWrittenByItsOwnCaller: with no other batch waiting, the committing
// Relay writes its batch itself (the write runs inside its commit call), with no
// hand-over to another goroutine and back.
func TestALoneBatchIsWrittenByItsOwnCaller(t *testing.T) {
	fromCommit := false
	g := &relayGroup{writers: 2, write: func(context.Context, []*relayCommit) {
		pcs := make([]uintptr, 32)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
		for {
			frame, more := frames.Next()
			fromCommit = fromCommit || strings.HasSuffix(frame.Function, ".(*relayGroup).commit")
			if !more {
				break
			}
		}
	}}
	if _, err := g.commit(t.Context(), &relayCommit{batch: RelayBatch{SessionID: "s"}}); err != nil {
		t.Fatal(err)
	}
	if !fromCommit {
		t.Fatal("the batch was written by another goroutine than its commit's")
	}
}

// TestAWaitingBatchIsWrittenAfterTheBusyWriters: a batch that arrives while every
// writer is busy with a group taken before it is written once they finish: a writer
// that wrote its own batch leaves the waiting ones to a writer goroutine, not to no
// one.
func TestAWaitingBatchIsWrittenAfterTheBusyWriters(t *testing.T) {
	entered, release := make(chan string, 3), make(chan struct{})
	g := &relayGroup{writers: 2, write: func(_ context.Context, group []*relayCommit) {
		entered <- group[0].batch.SessionID
		if group[0].batch.SessionID != "late" {
			<-release
		}
	}}
	results := make(chan error, 3)
	commit := func(session string) {
		_, err := g.commit(t.Context(), &relayCommit{batch: RelayBatch{SessionID: session}})
		results <- err
	}
	go commit("a")
	go commit("b")
	<-entered
	<-entered // both writers busy, each with a group of its own batch
	go commit("late")
	for {
		g.mu.Lock()
		waiting := len(g.pending)
		g.mu.Unlock()
		if waiting == 1 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	timeout := time.After(10 * time.Second)
	for range 3 {
		select {
		case err := <-results:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("a batch that waited for a writer was never written")
		}
	}
}
