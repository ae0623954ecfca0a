package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

func benchFixture(b *testing.B) (*store.Store, store.Session, int64) {
	b.Helper()
	st, _ := testutil.NewDB(b)
	s, gen := benchSession(b, st)
	return st, s, gen
}

// benchSessions makes n Sessions with benchSession and returns them with their lease
// generations.
func benchSessions(b *testing.B, st *store.Store, n int) ([]store.Session, []int64) {
	b.Helper()
	sessions := make([]store.Session, n)
	gens := make([]int64, n)
	for i := range sessions {
		sessions[i], gens[i] = benchSession(b, st)
	}
	return sessions, gens
}

// fiveDeltas is a Relay batch of five text deltas of the response resp, as a reply's
// middle is.
func fiveDeltas(resp string) []store.RelayOp {
	ops := make([]store.RelayOp, 5)
	for k := range ops {
		ops[k] = store.RelayOp{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"word %d "}`, k))}}
	}
	return ops
}

// benchSession makes a user, an Agent and a Session on st, and takes the Session's
// reader lease.
func benchSession(b *testing.B, st *store.Store) (store.Session, int64) {
	b.Helper()
	ctx := testutil.Context(b)
	u, err := st.CreateUser(ctx, store.NewUser{Email: uniq("bench") + "@example.com"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: uniq("p"), EngineKind: "claude", Enabled: true, SandboxBackend: store.SandboxLocal})
	if err != nil {
		b.Fatal(err)
	}
	a, err := st.CreateAgent(ctx, store.NewAgent{Name: uniq("a"), EngineKind: "claude", RuntimeProfileID: p.ID})
	if err != nil {
		b.Fatal(err)
	}
	s, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: u.ID, AgentID: a.ID})
	if err != nil {
		b.Fatal(err)
	}
	l, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: s.ID, Holder: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return s, l.Generation
}

// BenchmarkAppendParts measures one fenced reader commit of 10 parts plus the cursor
// and its NOTIFY; it reports parts per second.
func BenchmarkAppendParts(b *testing.B) {
	st, s, gen := benchFixture(b)
	ctx := testutil.Context(b)
	resp := "r1"
	parts := make([]store.NewPart, 10)
	for i := range parts {
		parts[i] = store.NewPart{ResponseID: &resp, Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"word %d "}`, i))}
	}
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		_, err := st.AppendParts(ctx, store.AppendRequest{SessionID: s.ID, LeaseGeneration: gen, Parts: parts,
			Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, i))}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(parts))/time.Since(start).Seconds(), "parts/s")
}

// BenchmarkInsertInput measures accepting one input with a client_message_id.
func BenchmarkInsertInput(b *testing.B) {
	st, s, _ := benchFixture(b)
	ctx := testutil.Context(b)
	for i := 0; b.Loop(); i++ {
		cmid := fmt.Sprintf("m-%d", i)
		if _, _, err := st.InsertInput(ctx, store.NewInput{SessionID: s.ID, ClientMessageID: &cmid, Content: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionReads measures the two reads of a Session on the API's hot paths:
// with its held inputs (every input's receipt) and at a stream position (every
// stream's opening), and the Relay's read of its facts (every observation).
func BenchmarkSessionReads(b *testing.B) {
	st, s, _ := benchFixture(b)
	ctx := testutil.Context(b)
	b.Run("with held inputs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := st.GetSessionWithHeldInputs(ctx, s.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("at stream position", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := st.GetSessionAtStreamPosition(ctx, s.ID, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("facts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.GetSessionFactsByID(ctx, s.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRelayBatchOfParts measures the Relay's commit of a batch of ten text
// deltas alone with its cursor (ApplyRelayBatch; one Relay, so its batch is written
// by the one-Session statement); it reports parts per second.
func BenchmarkRelayBatchOfParts(b *testing.B) {
	st, s, gen := benchFixture(b)
	ctx := testutil.Context(b)
	resp := "r1"
	ops := make([]store.RelayOp, 10)
	for i := range ops {
		ops[i] = store.RelayOp{Part: &store.NewPart{ResponseID: &resp,
			Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"word %d of a reply streamed as the model writes it, \"quoted\" "}`, i))}}
	}
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: s.ID, LeaseGeneration: gen, Ops: ops,
			Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, i))}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ops))/time.Since(start).Seconds(), "parts/s")
}

// roundTripCounter counts a store's round trips to PostgreSQL: each statement sent on
// its own (BEGIN and COMMIT included) and each pipeline of statements sent at once.
type roundTripCounter struct{ n atomic.Int64 }

func (c *roundTripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *roundTripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *roundTripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingStore opens a store on a new test database that counts its round trips.
func countingStore(b *testing.B) (*store.Store, *roundTripCounter) {
	b.Helper()
	_, dsn := testutil.NewDB(b)
	counter := &roundTripCounter{}
	st, err := store.Open(testutil.Context(b), dsn, testutil.Logger(b), store.Options{Tracer: counter})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st, counter
}

// BenchmarkRelayBatchesOfATurn measures the Relay's two batches with facts of one
// conversational turn: the input's admission, the program's status and the reply's
// start with its first parts, then its last parts, its end and the status again
// (ApplyRelayBatch; an op is one turn). It reports the round trips per batch.
func BenchmarkRelayBatchesOfATurn(b *testing.B) {
	ctx := testutil.Context(b)
	st, counter := countingStore(b)
	s, gen := benchSession(b, st)
	delta := func(resp string, i int) store.RelayOp {
		return store.RelayOp{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"word %d "}`, i))}}
	}
	reason := "end_turn"
	var roundTrips, batches int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: s.ID, Content: "hello"})
		if err != nil {
			b.Fatal(err)
		}
		resp := fmt.Sprintf("r%d", i)
		start := []store.RelayOp{{AdmitInput: in.ID}, {Status: "working"},
			{StartResponse: &store.ResponseStart{ResponseID: resp, Origin: store.OriginInput, InputIDs: []string{in.ID}}},
			{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(`{"type":"start"}`)}}, delta(resp, 1), delta(resp, 2)}
		end := []store.RelayOp{delta(resp, 3), delta(resp, 4), {Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(`{"type":"finish"}`)}},
			{EndResponse: &store.ResponseEnd{ResponseID: resp, Outcome: store.OutcomeCompleted, NativeReason: &reason}}, {Status: "idle"}}
		before := counter.n.Load()
		b.StartTimer()
		for j, ops := range [][]store.RelayOp{start, end} {
			_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: s.ID, LeaseGeneration: gen, Ops: ops,
				Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, 2*i+j))}})
			if err != nil {
				b.Fatal(err)
			}
		}
		roundTrips += counter.n.Load() - before
		batches += 2
	}
	b.ReportMetric(float64(roundTrips)/float64(batches), "round-trips/batch")
}

// BenchmarkRenewReaderLeases renews the leases of 100 Sessions, one statement each (the
// same statement with one lease, as every Relay renewed its own) and all in one, as a
// worker's keeper renews them (an op is one round of renewals).
func BenchmarkRenewReaderLeases(b *testing.B) {
	ctx := testutil.Context(b)
	st, _ := testutil.NewDB(b)
	refs := make([]store.LeaseRef, 100)
	for i := range refs {
		s, gen := benchSession(b, st)
		refs[i] = store.LeaseRef{SessionID: s.ID, Generation: gen}
	}
	renew := func(b *testing.B, refs []store.LeaseRef) {
		renewed, err := st.RenewReaderLeases(ctx, refs, time.Hour)
		if err != nil || len(renewed) != len(refs) {
			b.Fatalf("renewed %d of %d: %v", len(renewed), len(refs), err)
		}
	}
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for i := range refs {
				renew(b, refs[i:i+1])
			}
		}
	})
	b.Run("together", func(b *testing.B) {
		for b.Loop() {
			renew(b, refs)
		}
	})
}

// BenchmarkConcurrentRelayTurns measures many Sessions' Relays recording a turn each
// at once, as a worker's Relays do under load: every Session's two batches with facts
// (the admission, the status, the reply's start and its first parts; its last parts,
// its end and the status), each Relay waiting for its first batch before its second.
// An op is one turn of every Session; it reports the round trips per batch.
func BenchmarkConcurrentRelayTurns(b *testing.B) {
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			ctx := testutil.Context(b)
			st, counter := countingStore(b)
			sessions := make([]store.Session, n)
			gens := make([]int64, n)
			for i := range sessions {
				sessions[i], gens[i] = benchSession(b, st)
			}
			var roundTrips, batches int64
			for turn := 0; b.Loop(); turn++ {
				b.StopTimer()
				inputs := make([]string, n)
				for i, s := range sessions {
					in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: s.ID, Content: "hello"})
					if err != nil {
						b.Fatal(err)
					}
					inputs[i] = in.ID
				}
				before := counter.n.Load()
				b.StartTimer()
				relayAtOnce(b, n, func(i int) error {
					for j, ops := range turnBatches(fmt.Sprintf("r%d", turn), inputs[i]) {
						_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: sessions[i].ID, LeaseGeneration: gens[i], Ops: ops,
							Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, 2*turn+j))}})
						if err != nil {
							return err
						}
					}
					return nil
				})
				roundTrips += counter.n.Load() - before
				batches += int64(2 * n)
			}
			b.ReportMetric(float64(roundTrips)/float64(batches), "round-trips/batch")
		})
	}
}

// turnBatches are a turn's two Relay batches with facts for input, its reply resp.
func turnBatches(resp, input string) [][]store.RelayOp {
	delta := func(i int) store.RelayOp {
		return store.RelayOp{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"word %d "}`, i))}}
	}
	reason := "end_turn"
	start := []store.RelayOp{{AdmitInput: input}, {Status: "working"},
		{StartResponse: &store.ResponseStart{ResponseID: resp, Origin: store.OriginInput, InputIDs: []string{input}}},
		{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(`{"type":"start"}`)}}, delta(1), delta(2)}
	end := []store.RelayOp{delta(3), delta(4), {Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(`{"type":"finish"}`)}},
		{EndResponse: &store.ResponseEnd{ResponseID: resp, Outcome: store.OutcomeCompleted, NativeReason: &reason}}, {Status: "idle"}}
	return [][]store.RelayOp{start, end}
}

// BenchmarkConcurrentRelayParts measures 100 Sessions' Relays streaming replies at
// once: each records ten batches of five text deltas, one after another (batches of
// parts alone, as a reply's middle is). An op is every Session's ten batches.
func BenchmarkConcurrentRelayParts(b *testing.B) {
	ctx := testutil.Context(b)
	st, _ := testutil.NewDB(b)
	sessions, gens := benchSessions(b, st, 100)
	ops := fiveDeltas("r")
	for round := 0; b.Loop(); round++ {
		relayAtOnce(b, len(sessions), func(i int) error {
			for j := range 10 {
				_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: sessions[i].ID, LeaseGeneration: gens[i], Ops: ops,
					Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, 10*round+j))}})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// relayAtOnce runs relay for each of n Sessions at once, as a worker's Relays run,
// and fails b when one fails.
func relayAtOnce(b *testing.B, n int, relay func(i int) error) {
	b.Helper()
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- relay(i) }()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInputReceiptBesideRelays measures an input's acceptance (AcceptInput)
// while 100 Sessions' Relays stream replies (batches of five text deltas, one after
// another), for an input to one of the streaming Sessions and for one to a Session
// no Relay writes to. An op is one acceptance; it reports the p50 and p99.
func BenchmarkInputReceiptBesideRelays(b *testing.B) {
	for _, target := range []string{"streaming", "quiet"} {
		b.Run("session="+target, func(b *testing.B) {
			ctx := testutil.Context(b)
			st, _ := testutil.NewDB(b)
			sessions, gens := benchSessions(b, st, 100)
			quiet, _ := benchSessions(b, st, 20)
			ops := fiveDeltas("r")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range sessions {
				wg.Go(func() {
					for j := 0; ; j++ {
						select {
						case <-stop:
							return
						default:
						}
						_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: sessions[i].ID, LeaseGeneration: gens[i], Ops: ops,
							Cursor: &store.CursorUpdate{Generation: "g", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, j))}})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				sid := sessions[i%len(sessions)].ID
				if target == "quiet" {
					sid = quiet[i%len(quiet)].ID
				}
				start := time.Now()
				if _, err := st.AcceptInput(ctx, store.NewInput{SessionID: sid, Content: "hello"}); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			close(stop)
			wg.Wait()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
