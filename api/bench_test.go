package api

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// Scale of the load benchmarks: kept small enough for a shared 2-core machine.
const (
	benchSessions  = 20
	benchFollowers = 3
	benchParts     = 30
	benchInputs    = 10
	benchWorkers   = 8
)

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func reportLatencies(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(float64(p50.Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, name+"-p99-ms")
	b.Logf("%s: n=%d p50=%s p99=%s max=%s", name, len(lat), p50, p99, lat[len(lat)-1])
}

// BenchmarkInputReceipt measures the latency of POST /inputs (row committed, workflow
// signalled through the recording signaler) with benchWorkers clients sending to
// benchSessions Sessions at once.
func BenchmarkInputReceipt(b *testing.B) {
	f := newFixture(b)
	sessions := make([]string, benchSessions)
	for i := range sessions {
		sessions[i] = f.newSession(f.member)
	}
	var mu sync.Mutex
	var lat []time.Duration
	round := 0
	for b.Loop() {
		round++
		jobs := make(chan [2]int)
		var wg sync.WaitGroup
		for range benchWorkers {
			wg.Go(func() {
				for j := range jobs {
					body := map[string]any{"content": "benchmark message", "client_message_id": fmt.Sprintf("r%d-m%d", round, j[1])}
					start := time.Now()
					f.call("POST", "/api/v1/sessions/"+sessions[j[0]]+"/inputs", f.member, body).ok(b)
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		for s := range benchSessions {
			for m := range benchInputs {
				jobs <- [2]int{s, m}
			}
		}
		close(jobs)
		wg.Wait()
	}
	reportLatencies(b, "receipt", lat)
}

// statementCounter counts the statements a store's connections run, BEGIN and COMMIT
// included: with pgx's cached prepared statements each is one round trip.
type statementCounter struct{ n atomic.Int64 }

var _ pgx.QueryTracer = (*statementCounter)(nil)

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// newCountingFixture is newFixture whose server runs on a store that counts its
// statements. The recording signaler keeps the fixture's own store, so the count is the
// handlers' alone (a deployment signals Temporal, not PostgreSQL).
func newCountingFixture(t testing.TB, tune ...func(*Options)) (*fixture, *statementCounter) {
	t.Helper()
	counter := &statementCounter{}
	f := newFixtureOn(t, func(dsn string, o *Options) {
		for _, fn := range tune {
			fn(o)
		}
		key := make([]byte, 32)
		_, err := rand.Read(key)
		require.NoError(t, err)
		st, err := store.Open(testutil.Context(t), dsn, testutil.Logger(t), store.Options{SecretsKey: key, Tracer: counter})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		o.Store = st
	})
	return f, counter
}

// BenchmarkSendInput measures one client sending messages with a client_message_id,
// one after another, round-robin over sendInputSessions Sessions: the receipt's own
// latency without contention. It reports the statements (round trips) per receipt.
func BenchmarkSendInput(b *testing.B) {
	const sendInputSessions = 50
	f, counter := newCountingFixture(b)
	sessions := make([]string, sendInputSessions)
	for i := range sessions {
		sessions[i] = f.newSession(f.member)
		// One message each first, so every statement is prepared and the token's
		// last use recorded before the count starts.
		f.call("POST", "/api/v1/sessions/"+sessions[i]+"/inputs", f.member, map[string]any{"content": "warm up"}).ok(b)
	}
	counter.n.Store(0)
	for i := 0; b.Loop(); i++ {
		body := map[string]any{"content": "benchmark message", "client_message_id": fmt.Sprintf("m%d", i)}
		f.call("POST", "/api/v1/sessions/"+sessions[i%len(sessions)]+"/inputs", f.member, body).ok(b)
	}
	b.ReportMetric(float64(counter.n.Load())/float64(b.N), "statements/op")
}

// benchPart is a data part carrying the time it was handed to AppendParts.
type benchPart struct {
	Sent int64 `json:"sent"`
}

// BenchmarkPartDelivery measures part delivery latency: from the Relay's AppendParts
// call (which commits and notifies) to a follower reading the part on its SSE stream,
// for benchSessions Sessions each followed by benchFollowers streams.
func BenchmarkPartDelivery(b *testing.B) {
	f := newFixture(b)
	relays := make([]*relay, benchSessions)
	for i := range relays {
		relays[i] = f.relay(f.newSession(f.member))
	}
	var mu sync.Mutex
	var lat []time.Duration
	for b.Loop() {
		var readers sync.WaitGroup
		for _, r := range relays {
			var outSeq int64
			require.NoError(b, f.db.QueryRow(f.ctx, `SELECT output_seq FROM session_outputs WHERE session_id = $1`, r.sessionID).Scan(&outSeq))
			for range benchFollowers {
				resp := f.openStream(f.ctx, r.sessionID, fmt.Sprintf("?after_seq=%d", outSeq), f.member)
				readers.Go(func() {
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 64<<10), 1<<20)
					for sc.Scan() {
						data, ok := strings.CutPrefix(sc.Text(), "data: ")
						if !ok || !strings.Contains(data, `"data-bench"`) {
							continue
						}
						var part struct {
							Data benchPart `json:"data"`
						}
						if json.Unmarshal([]byte(data), &part) == nil {
							d := time.Since(time.Unix(0, part.Data.Sent))
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						}
					}
				})
			}
		}
		var writers sync.WaitGroup
		for _, r := range relays {
			writers.Go(func() {
				for range benchParts {
					data, _ := json.Marshal(benchPart{Sent: time.Now().UnixNano()})
					r.appendQuiet(b, engines.MustFrame(engines.DataChunk{Name: "bench", Data: data}))
				}
				r.appendQuiet(b, engines.MustFrame(engines.FinishChunk{FinishReason: engines.FinishStop}))
			})
		}
		writers.Wait()
		readers.Wait()
	}
	reportLatencies(b, "delivery", lat)
}

// appendQuiet appends without require (safe from writer goroutines).
func (r *relay) appendQuiet(b *testing.B, frames ...engines.Frame) {
	parts := make([]store.NewPart, len(frames))
	for i, fr := range frames {
		raw, _ := fr.MarshalJSON()
		parts[i] = store.NewPart{Frame: raw}
	}
	if _, err := r.f.st.AppendParts(r.f.ctx, store.AppendRequest{SessionID: r.sessionID, LeaseGeneration: r.lease, Parts: parts}); err != nil {
		b.Error(err)
	}
}

// BenchmarkEncodeParts encodes a batch of 50 text deltas as PostgreSQL gives them back
// (jsonb's key order and spacing) into the stream's SSE bytes, per part.
func BenchmarkEncodeParts(b *testing.B) {
	rows := make([]store.OutputPart, 50)
	for i := range rows {
		rows[i] = store.OutputPart{SessionID: "s", Seq: int64(1000 + i),
			Frame: []byte(`{"id": "text-resp-0123456789", "type": "text-delta", "delta": "one more chunk of a streamed reply, about sixty bytes"}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := encodeParts(rows); res.err != nil || len(res.parts) != len(rows) {
			b.Fatal(res.err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/part")
}
