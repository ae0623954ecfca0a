package loadbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/store"
)

// programFloor is what an Agent program emits, read directly from its boxes.
type programFloor struct {
	// rate is text deltas per second across every box.
	rate float64
	// firstOutput is submit to the response's first event, per response.
	firstOutput samples
	// eventToRead is a text delta's writing by the program (its at_us) to its
	// reading by the consumer, per delta that carries the time: the first hop of a
	// part, which event-to-part takes on to the part's commit.
	eventToRead samples
}

// floorProgram is an Agent program as the program floor runs it: its adapter and
// the box spec the worker would give it (activities.DefaultSpec, the program's
// install bound in, the model service reached through the box's egress).
type floorProgram struct {
	adapter engines.EngineAdapter
	spec    sandbox.Spec
}

// scriptedFloorProgram is the scripted program built at binary.
func scriptedFloorProgram(binary string) (floorProgram, error) {
	adapter := &scriptengine.Adapter{BinaryPath: scriptedMount + "/scriptagent"}
	spec, err := activities.DefaultSpec(store.RuntimeProfile{ID: "program-floor", EngineKind: scriptengine.Kind, SandboxBackend: store.SandboxLocal},
		store.Agent{ID: "program-floor", EngineKind: scriptengine.Kind}, adapter)
	if err != nil {
		return floorProgram{}, err
	}
	spec.Mounts = append(spec.Mounts, scriptedMountOf(binary))
	return floorProgram{adapter: adapter, spec: spec}, nil
}

// claudeMount is where the platform binds the pinned Claude Code in its boxes.
const claudeMount = "/opt/astrabox/claude"

// claudeFloorProgram is the pinned Claude Code of the checkout at root, as the
// worker runs it: the floor's backend routes the box's model forward to the
// stack's scripted model server (floorEgress).
func claudeFloorProgram(root string) (floorProgram, error) {
	prog, err := agentbin.Locate(root, agentbin.Claude)
	if err != nil {
		return floorProgram{}, err
	}
	rel, err := filepath.Rel(prog.Dir, prog.Command[0])
	if err != nil {
		return floorProgram{}, err
	}
	adapter := claude.NewAdapter(claude.Config{Command: append([]string{filepath.Join(claudeMount, rel)}, prog.Command[1:]...)})
	spec, err := activities.DefaultSpec(store.RuntimeProfile{ID: "program-floor-claude", EngineKind: claude.EngineKind, SandboxBackend: store.SandboxLocal},
		store.Agent{ID: "program-floor-claude", EngineKind: claude.EngineKind}, adapter)
	if err != nil {
		return floorProgram{}, err
	}
	spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: prog.Dir, Target: claudeMount})
	activities.AddModelEgress(&spec, adapter.SandboxRequest())
	return floorProgram{adapter: adapter, spec: spec}, nil
}

// floorEgress routes the floor boxes' model forward to the model server at url,
// with the placeholder key the scripted model server accepts, as the worker's
// egress does.
func floorEgress(url string) map[string]egress.Route {
	return map[string]egress.Route{activities.ModelForwardName: {Upstream: url, Headers: map[string]string{"x-api-key": activities.ModelPlaceholderKey}}}
}

// floorBoxes are boxes of the program floor's own local backend, made like the
// worker makes a Session's box, each with its program running.
type floorBoxes struct {
	backend *local.Backend
	ids     []string
	clients []engines.RuntimeClient
}

// startFloorBoxes makes n boxes running prog, as the platform does.
func startFloorBoxes(ctx context.Context, n int, opts local.Options, prog floorProgram, log *zap.Logger) (_ *floorBoxes, err error) {
	backend, err := local.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("program floor backend: %w", err)
	}
	fb := &floorBoxes{backend: backend, clients: make([]engines.RuntimeClient, n), ids: make([]string, n)}
	defer func() {
		if err != nil {
			err = errors.Join(err, fb.close(context.WithoutCancel(ctx)))
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	var mu sync.Mutex
	for i := range n {
		g.Go(func() error {
			h, err := backend.Create(gctx, prog.spec)
			if err != nil {
				return fmt.Errorf("program floor box: %w", err)
			}
			mu.Lock()
			fb.ids[i] = h.ID()
			mu.Unlock()
			rt, err := prog.adapter.ActivateRuntime(gctx, engines.EngineStartupContext{SessionID: uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: h.ID()}, enginebox.New(h))
			if err != nil {
				return fmt.Errorf("program floor runtime: %w", err)
			}
			fb.clients[i] = rt.EngineClient
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	log.Info("program floor boxes ready", zap.Int("boxes", n))
	return fb, nil
}

func (fb *floorBoxes) close(ctx context.Context) error {
	var errs []error
	for i, id := range fb.ids {
		if fb.clients[i] != nil {
			errs = append(errs, fb.clients[i].Close())
		}
		if id != "" {
			errs = append(errs, fb.backend.Destroy(ctx, id))
		}
	}
	errs = append(errs, fb.backend.Close())
	return errors.Join(errs...)
}

// run has every program answer warm (unmeasured: a program's first input can
// wait for its start-up, as a Session's first input does in the platform's phase),
// then turns inputs of text, one turn after the other, read by a consumer that does
// nothing with the events.
func (fb *floorBoxes) run(ctx context.Context, warm string, turns int, text string) (programFloor, error) {
	readers := make([]*floorReader, len(fb.clients))
	for i, c := range fb.clients {
		readCtx, cancel := context.WithCancel(ctx)
		next, stop := iter.Pull2(c.Events(readCtx, nil))
		readers[i] = &floorReader{client: c, next: next}
		defer cancel()
		defer stop()
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range readers {
		g.Go(func() error { return r.answer(gctx, warm, func(time.Duration) {}, func(time.Time) {}) })
	}
	if err := g.Wait(); err != nil {
		return programFloor{}, err
	}
	var (
		mu       sync.Mutex
		first    samples
		toRead   samples
		total    atomic.Int64
		start    = time.Now()
		lastSeen atomic.Int64
	)
	onFirst := func(d time.Duration) {
		mu.Lock()
		first = append(first, d)
		mu.Unlock()
	}
	onDelta := func(written time.Time) {
		now := time.Now()
		total.Add(1)
		lastSeen.Store(now.UnixNano())
		if !written.IsZero() {
			mu.Lock()
			toRead = append(toRead, now.Sub(written))
			mu.Unlock()
		}
	}
	g, gctx = errgroup.WithContext(ctx)
	for _, r := range readers {
		g.Go(func() error {
			for range turns {
				if err := r.answer(gctx, text, onFirst, onDelta); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return programFloor{}, err
	}
	elapsed := time.Unix(0, lastSeen.Load()).Sub(start)
	return programFloor{rate: float64(total.Load()) / elapsed.Seconds(), firstOutput: first, eventToRead: toRead}, nil
}

// floorReader is one floor box's program and the reader of its events.
type floorReader struct {
	client engines.RuntimeClient
	next   func() (engines.Event, error, bool)
}

// answer submits an input of text and reads the program's events to the end of its
// response, which is the input's once its ResponseStarted names the input: it calls
// first with the time from submit to that event, and delta at each text delta with
// the time the program wrote it (zero when the delta does not say).
func (r *floorReader) answer(ctx context.Context, text string, first func(time.Duration), delta func(written time.Time)) error {
	inputID := uuid.NewString()
	sent := time.Now()
	if err := r.client.Submit(ctx, engines.TextInput(inputID, text)); err != nil {
		return fmt.Errorf("program floor submit: %w", err)
	}
	responseID := ""
	for {
		ev, err, ok := r.next()
		if !ok {
			return errors.New("program floor: the program's output ended")
		}
		if err != nil {
			return fmt.Errorf("program floor read: %w", err)
		}
		switch e := ev.(type) {
		case engines.ResponseStarted:
			if responseID == "" && slices.Contains(e.InputIDs, inputID) {
				responseID = e.ResponseID
				first(time.Since(sent))
			}
		case engines.ResponseOutput:
			if responseID != "" && e.ResponseID == responseID && e.Frame.Type() == "text-delta" {
				delta(writtenAt(e.Frame))
			}
		case engines.ResponseEnded:
			if responseID != "" && e.ResponseID == responseID {
				return nil
			}
		}
	}
}

// writtenAt is when the scripted program wrote a delta (its at_us, which the
// platform's parts carry too); zero for a program that does not say.
func writtenAt(f engines.Frame) time.Time {
	raw, ok := f.Field("providerMetadata")
	if !ok {
		return time.Time{}
	}
	var meta struct {
		Scriptagent struct {
			AtMicros int64 `json:"at_us"`
		} `json:"scriptagent"`
	}
	if json.Unmarshal(raw, &meta) != nil || meta.Scriptagent.AtMicros <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(meta.Scriptagent.AtMicros)
}

// partFrame is a text delta of the size the scripted program's make.
var partFrame = []byte(`{"type":"text-delta","id":"t1","delta":"word 42 ","providerMetadata":{"scriptagent":{"at_us":1764600000000000}}}`)

// durableFloor is PostgreSQL's own rate for part-sized rows on the stack's
// cluster: writers concurrent writers, each committing batches of batch rows in
// one multi-row INSERT per transaction (commits of concurrent writers share WAL
// flushes: group commit), for about d.
func durableFloor(ctx context.Context, dsn string, writers, batch int, d time.Duration) (float64, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("durable floor: %w", err)
	}
	defer pool.Close()
	const table = "bench_durable_floor"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (session_id uuid NOT NULL, seq bigint NOT NULL, response_id text, frame jsonb NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (session_id, seq))`); err != nil {
		return 0, fmt.Errorf("durable floor table: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE `+table) //nolint:errcheck // the cluster is thrown away with the stack
	var rows atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	g, gctx := errgroup.WithContext(ctx)
	for w := range writers {
		g.Go(func() error {
			session := fmt.Sprintf("00000000-0000-4000-8000-%012d", w)
			ids := make([]string, batch)
			seqs := make([]int64, batch)
			frames := make([]string, batch)
			var seq int64
			for time.Now().Before(deadline) {
				for i := range batch {
					seq++
					ids[i], seqs[i], frames[i] = session, seq, string(partFrame)
				}
				err := pgx.BeginFunc(gctx, pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(gctx, `INSERT INTO `+table+` (session_id, seq, response_id, frame)
						SELECT s, q, 'resp-floor', f FROM unnest($1::uuid[], $2::bigint[], $3::jsonb[]) AS u(s, q, f)`, ids, seqs, frames)
					return err
				})
				if err != nil {
					return fmt.Errorf("durable floor insert: %w", err)
				}
				rows.Add(int64(batch))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(rows.Load()) / time.Since(start).Seconds(), nil
}

// receiptFloor serves a bare HTTP handler that does what an input's receipt must
// (one INSERT ... ON CONFLICT of an input row, committed) with a pool of poolSize
// connections, and times sessions concurrent clients each posting turns times.
func receiptFloor(ctx context.Context, dsn string, poolSize, sessions, turns int) (samples, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("receipt floor: %w", err)
	}
	cfg.MaxConns = int32(poolSize)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("receipt floor: %w", err)
	}
	defer pool.Close()
	const table = "bench_receipt_floor"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, session_id text NOT NULL, client_message_id text NOT NULL,
		content jsonb NOT NULL, accepted_at timestamptz NOT NULL DEFAULT now(), UNIQUE (session_id, client_message_id))`); err != nil {
		return nil, fmt.Errorf("receipt floor table: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE `+table) //nolint:errcheck // the cluster is thrown away with the stack
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sessions/{id}/inputs", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Content         string `json:"content"`
			ClientMessageID string `json:"client_message_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		content, _ := json.Marshal([]map[string]string{{"type": "text", "text": body.Content}})
		var id int64
		var at time.Time
		err := pool.QueryRow(r.Context(), `INSERT INTO `+table+` (session_id, client_message_id, content) VALUES ($1, $2, $3)
			ON CONFLICT (session_id, client_message_id) DO UPDATE SET session_id = EXCLUDED.session_id RETURNING id, accepted_at`,
			r.PathValue("id"), body.ClientMessageID, content).Scan(&id, &at)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"input_id": id, "accepted_at": at}}) //nolint:errcheck // the client times the answer
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receipt floor listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)                               //nolint:errcheck // ends with Shutdown
	defer srv.Shutdown(context.WithoutCancel(ctx)) //nolint:errcheck // nothing is left to serve
	c := newAPIClient("http://"+ln.Addr().String(), "none")
	var mu sync.Mutex
	var lat samples
	g, gctx := errgroup.WithContext(ctx)
	for s := range sessions {
		g.Go(func() error {
			for t := range turns {
				start := time.Now()
				if err := c.call(gctx, http.MethodPost, fmt.Sprintf("/sessions/s%d/inputs", s), map[string]string{"content": "slow:50:10", "client_message_id": fmt.Sprintf("m%d", t)}, nil); err != nil {
					return err
				}
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
			return nil
		})
	}
	return lat, g.Wait()
}
