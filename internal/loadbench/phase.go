package loadbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/astrabox/astrabox/internal/faultstack"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// bench is one run's stack and what it drives the stack with.
type bench struct {
	opts  Options
	log   *zap.Logger
	stack *faultstack.Stack
	api   *apiClient
	// apis are the API processes' clients; Session i is driven through apis[i%len].
	apis    []*apiClient
	agentID string
	binary  string
	// root is the checkout, whose tools hold the pinned Agent programs.
	root        string
	workerDebug []string
	apiDebug    string
	// workerMetrics are the workers' Prometheus endpoints.
	workerMetrics []string
	// apiMetrics are the API processes' Prometheus endpoints.
	apiMetrics []string
}

// scriptedAgent makes a RuntimeProfile of the scripted program (in the store, as
// the dev stack seeds its profiles: through the API a local profile must name an
// image folder, and the host's own system is what the dev stack's boxes run) and
// an Agent of it through the API.
func (b *bench) scriptedAgent(ctx context.Context) (string, error) {
	st, err := store.Open(ctx, b.stack.DSN(), b.log.Named("store"))
	if err != nil {
		return "", fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	profile, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: "bench-scripted", EngineKind: scriptengine.Kind, Enabled: true,
		SandboxBackend: store.SandboxLocal, SandboxTenancy: store.TenancyConversation})
	if err != nil {
		return "", fmt.Errorf("create the scripted RuntimeProfile: %w", err)
	}
	var agent struct {
		ID string `json:"agent_id"`
	}
	if err := b.api.call(ctx, http.MethodPost, "/agents", map[string]any{"name": "bench-scripted", "runtime_profile_id": profile.ID}, &agent); err != nil {
		return "", err
	}
	return agent.ID, nil
}

// turnResult is what one Session's turn measured.
type turnResult struct {
	receipt   time.Duration
	firstPart time.Duration
	// arrivals are each follower's part arrivals by seq.
	arrivals []map[int64]time.Time
	// unordered counts the parts, over all followers, whose seq did not follow the
	// one before.
	unordered int
}

// session is one Session the phase drives.
type session struct {
	id   string
	last int64
	api  *apiClient
}

// turn sends one input to s with followers streams open, and reads them to the
// end of the reply.
func (b *bench) turn(ctx context.Context, s *session, followers int, text, clientID string) (turnResult, error) {
	reads := make([]func() (streamed, error), followers)
	for i := range reads {
		read, err := s.api.follow(ctx, s.id, s.last)
		if err != nil {
			return turnResult{}, err
		}
		reads[i] = read
	}
	results := make([]streamed, followers)
	var g errgroup.Group
	for i, read := range reads {
		g.Go(func() (err error) {
			results[i], err = read()
			return err
		})
	}
	sent := time.Now()
	var receipt struct {
		InputID string `json:"input_id"`
	}
	err := s.api.call(ctx, http.MethodPost, "/sessions/"+s.id+"/inputs", map[string]string{"content": text, "client_message_id": clientID}, &receipt)
	took := time.Since(sent)
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return turnResult{}, err
	}
	out := turnResult{receipt: took, firstPart: results[0].firstPart.Sub(sent)}
	for _, r := range results {
		out.arrivals = append(out.arrivals, r.at)
		out.unordered += r.unordered
		s.last = max(s.last, r.last)
	}
	return out, nil
}

// phase measures n Sessions and their floors and returns the table's rows.
func (b *bench) phase(ctx context.Context, n int, durable float64, floorOpts local.Options, profile bool) ([]Row, string, error) {
	o := b.opts
	followers := o.followersOf(n)
	tag := fmt.Sprintf("@%d", n)
	b.log.Info("phase", zap.Int("sessions", n), zap.Int("followers", followers))

	scripted, err := scriptedFloorProgram(b.binary)
	if err != nil {
		return nil, "", err
	}
	fb, err := startFloorBoxes(ctx, n, floorOpts, scripted, b.log.Named("floor"))
	if err != nil {
		return nil, "", err
	}
	floorCPU := takeCPU()
	prog, err := fb.run(ctx, scriptedWarm, o.Turns, scriptedReply(o))
	floorCores := takeCPU().coresSince(floorCPU)
	if cerr := fb.close(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", err
	}
	receiptLat, err := receiptFloor(ctx, b.stack.DSN(), 20, n, o.Turns)
	if err != nil {
		return nil, "", err
	}
	deliveryLat, err := deliveryFloor(ctx, b.stack.DSN(), n, followers, o.Deltas, o.Gap)
	if err != nil {
		return nil, "", err
	}

	sessions, err := b.newSessions(ctx, b.agentID, n, fmt.Sprintf("bench-%d", n))
	if err != nil {
		return nil, "", err
	}
	cold, err := b.warm(ctx, sessions, scriptedWarm)
	if err != nil {
		return nil, "", err
	}
	warmSeq := map[string]int64{}
	for _, s := range sessions {
		warmSeq[s.id] = s.last
	}

	var profiles errgroup.Group
	if profile && o.ProfileDir != "" {
		for name, base := range map[string]string{"serve": b.apiDebug, "worker": b.workerDebug[0]} {
			profiles.Go(func() error {
				return fetch(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, o.ProfileSeconds), filepath.Join(o.ProfileDir, name+"-cpu.pprof"))
			})
		}
	}
	sourcesBefore, err := b.handOverSources(ctx)
	if err != nil {
		return nil, "", err
	}
	scrapedBefore, err := b.scrapeFigures(ctx)
	if err != nil {
		return nil, "", err
	}
	cpuBefore := takeCPU()
	start := time.Now()
	receipts, firsts, arrivals, err := b.measuredTurns(ctx, sessions, followers, scriptedReply(o))
	if err != nil {
		return nil, "", err
	}
	streamedFor := time.Since(start)
	cores := takeCPU().coresSince(cpuBefore)
	scrapedAfter, err := b.scrapeFigures(ctx)
	if err != nil {
		return nil, "", err
	}
	measured := scrapedAfter.since(scrapedBefore)
	lockWaits, err := readLockWaits(b.pgLogPath(), measured.pgLog)
	if err != nil {
		return nil, "", err
	}
	if err := profiles.Wait(); err != nil {
		return nil, "", err
	}
	if profile && o.ProfileDir != "" {
		for name, base := range map[string]string{"serve": b.apiDebug, "worker": b.workerDebug[0]} {
			if err := fetch(ctx, base+"/debug/pprof/allocs", filepath.Join(o.ProfileDir, name+"-allocs.pprof")); err != nil {
				return nil, "", err
			}
		}
		if err := os.WriteFile(filepath.Join(o.ProfileDir, "statements.txt"), []byte(measured.statements.table(n*o.Turns)), 0o644); err != nil {
			return nil, "", fmt.Errorf("save the statements per turn: %w", err)
		}
	}

	if err := b.waitIdle(ctx, sessions); err != nil {
		return nil, "", err
	}
	select {
	case <-ctx.Done():
		return nil, "", ctx.Err()
	case <-time.After(idleQuiet):
	}
	heapIdle, err := b.workerHeap(ctx)
	if err != nil {
		return nil, "", err
	}
	if profile && o.ProfileDir != "" {
		// What the worker holds for its idle Sessions.
		if err := fetch(ctx, b.workerDebug[0]+"/debug/pprof/heap", filepath.Join(o.ProfileDir, "worker-idle-heap.pprof")); err != nil {
			return nil, "", err
		}
		if err := fetch(ctx, b.workerDebug[0]+"/debug/pprof/goroutine?debug=1", filepath.Join(o.ProfileDir, "worker-idle-goroutines.txt")); err != nil {
			return nil, "", err
		}
	}
	m, err := b.partFigures(ctx, warmSeq, arrivals, start)
	if err != nil {
		return nil, "", err
	}
	handOver, err := b.handOvers(ctx, sessions, sourcesBefore)
	if err != nil {
		return nil, "", err
	}
	events, err := b.historyPerTurn(ctx, sessions, o.Turns+1, o.Turns, start, start.Add(streamedFor))
	if err != nil {
		return nil, "", err
	}
	spread, err := b.spread(ctx, sessions)
	if err != nil {
		return nil, "", err
	}
	// After every figure of the measured turns is read: the burst's turns are not
	// theirs.
	burst, err := b.burst(ctx, sessions)
	if err != nil {
		return nil, "", err
	}
	heapReleased, err := b.releasedHeap(ctx, sessions)
	if err != nil {
		return nil, "", err
	}
	if err := b.saveWorkerHeap(ctx, profile, "released"); err != nil {
		return nil, "", err
	}
	if err := b.archive(ctx, sessions); err != nil {
		return nil, "", err
	}
	// The worker's heap with none of the phase's Sessions, after the growth they
	// caused once (pools, caches, the protobuf and gRPC state first touched): the
	// Sessions' own cost is what the worker holds above it.
	heapNone, err := b.endedHeap(ctx, sessions)
	if err != nil {
		return nil, "", err
	}
	if err := b.saveWorkerHeap(ctx, profile, "none"); err != nil {
		return nil, "", err
	}
	b.log.Info("phase done", zap.Int("sessions", n), zap.Duration("streamed_for", streamedFor), zap.Int("parts", m.parts))

	rows := []Row{}
	floorRate := min(prog.rate, durable)
	rateGoal := "report"
	var rateMet *bool
	if n >= 100 {
		rateGoal = ">= 0.8 floor, >= 5000/s"
		rateMet = met(m.rate >= 0.8*floorRate && m.rate >= 5000)
	}
	rows = append(rows, Row{Figure: "durable parts/s " + tag, Goal: rateGoal, P50: rateString(m.rate),
		Floor: fmt.Sprintf("%s (program %s, durable %s)", rateString(floorRate), rateString(prog.rate), rateString(durable)), Ratio: m.rate / floorRate, Met: rateMet})
	e2pGoal := 20 * time.Millisecond
	if n > 20 {
		e2pGoal = 50 * time.Millisecond
	}
	ef := prog.eventToRead.pct(99)
	rows = append(rows, Row{Figure: "event-to-part " + tag, Goal: "p99 <= " + msString(e2pGoal), P50: msString(m.eventToPart.pct(50)), P99: msString(m.eventToPart.pct(99)),
		Floor: msString(ef), Ratio: latencyRatio(ef, m.eventToPart.pct(99)), Met: met(m.eventToPart.pct(99) <= e2pGoal)})
	for _, h := range []struct {
		figure string
		h      histogram
	}{{"Relay read to commit", measured.relayLag}, {"Relay read to commit, admissions", measured.admissionLag}, {"session log mirror", measured.mirror}} {
		rows = append(rows, Row{Figure: h.figure + " " + tag, Goal: "report", P50: msString(h.h.pct(50)), P99: msString(h.h.pct(99))})
	}
	rf := receiptLat.pct(99)
	rows = append(rows, Row{Figure: "input receipt " + tag, Goal: "p99 <= 2x floor, <= 25 ms", P50: msString(receipts.pct(50)), P99: msString(receipts.pct(99)),
		Floor: msString(rf), Ratio: latencyRatio(rf, receipts.pct(99)), Met: met(receipts.pct(99) <= 2*rf && (n < 100 || receipts.pct(99) <= 25*time.Millisecond))})
	pf := prog.firstOutput.pct(99)
	rows = append(rows, Row{Figure: "time to first part " + tag, Goal: "p99 - floor <= 50 ms", P50: msString(firsts.pct(50)), P99: msString(firsts.pct(99)),
		Floor: msString(pf), Ratio: latencyRatio(pf, firsts.pct(99)), Met: met(firsts.pct(99)-pf <= 50*time.Millisecond)})
	rows = append(rows, handOver.rows(tag)...)
	rows = append(rows, burst.rows(tag)...)
	var deliveryMet *bool
	if n <= 20 && followers >= 10 {
		deliveryMet = met(m.commitToSSE.pct(99) <= 30*time.Millisecond)
	}
	df := deliveryLat.pct(99)
	rows = append(rows, Row{Figure: fmt.Sprintf("commit-to-SSE %s x%d", tag, followers), Goal: "p99 <= 30 ms (20 x10)", P50: msString(m.commitToSSE.pct(50)), P99: msString(m.commitToSSE.pct(99)),
		Floor: msString(df), Ratio: latencyRatio(df, m.commitToSSE.pct(99)), Met: deliveryMet})
	perSession, livePerSession := heapIdle.perSession(heapNone, n)
	perReleased, livePerReleased := heapReleased.perSession(heapNone, n)
	goroutinesReleased, _ := heapReleased.goroutinesPerSession(heapNone, n)
	// A share of the heap is a per-Session figure only over many Sessions: with a
	// few, what the worker grows or frees on its own between the readings is most
	// of it, so no goal is judged on it.
	var idleHeapMet, releasedHeapMet *bool
	if n >= heapGoalSessions {
		idleHeapMet, releasedHeapMet = met(perSession <= 100), met(livePerReleased <= 10)
	}
	rows = append(rows, Row{Figure: "worker heap/idle Session " + tag, Goal: "<= 100 KiB", P50: fmt.Sprintf("%.0f KiB", perSession), Met: idleHeapMet})
	rows = append(rows, Row{Figure: "worker live heap/idle Session " + tag, Goal: "report", P50: fmt.Sprintf("%.0f KiB", livePerSession)})
	goroutines, stackKiB := heapIdle.goroutinesPerSession(heapNone, n)
	rows = append(rows, Row{Figure: "worker goroutines/idle Session " + tag, Goal: "report", P50: fmt.Sprintf("%.1f (stacks %.0f KiB)", goroutines, stackKiB)})
	rows = append(rows, Row{Figure: "worker heap/released Session " + tag, Goal: "~0 (live <= 10 KiB)",
		P50: fmt.Sprintf("%.0f KiB (live %.0f KiB, %.1f goroutines)", perReleased, livePerReleased, goroutinesReleased), Met: releasedHeapMet})
	rows = append(rows, Row{Figure: "history events/turn " + tag, Goal: "reported, bounded", P50: fmt.Sprintf("%.1f", events.p50), P99: fmt.Sprintf("%.1f", events.p99)})
	rows = append(rows, Row{Figure: "Sessions per worker " + tag, Goal: "spread over every worker", P50: spread})
	rows = append(rows, Row{Figure: "cold start (box + runtime) " + tag, Goal: "report", P50: msString(cold.pct(50)), P99: msString(cold.pct(99))})
	// The program floor's line beside the platform's shows what each part costs
	// per delta when the boxes are read directly and when the platform reads them.
	return rows, fmt.Sprintf("cores used during the measured turns %s: %s (of %d)\ncores used by the program floor %s: %s (of %d)\nhistory events per measured turn %s: %s\nsignals per measured turn %s: %s\nwaits for a database connection during the measured turns %s: API %s; workers %s\nlock waits over %s in PostgreSQL during the measured turns %s: %s\nstatements PostgreSQL ran per measured turn %s: %s",
		tag, cpuLine(cores), numCPU(), tag, cpuLine(floorCores), numCPU(), tag, events.byKindLine(), tag, events.signalsLine(), tag, measured.apiWaits, measured.workerWaits,
		msString(lockWaitLogged), tag, lockWaits, tag, measured.statements.perTurn(n*o.Turns)), nil
}

// newSessions creates n Sessions of the Agent, alternating between the APIs; key
// prefixes their idempotency keys, so each set is new.
func (b *bench) newSessions(ctx context.Context, agentID string, n int, key string) ([]*session, error) {
	sessions := make([]*session, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range sessions {
		g.Go(func() error {
			var out struct {
				SessionID string `json:"session_id"`
			}
			if err := b.api.callWith(gctx, http.MethodPost, "/agents/"+agentID+"/conversations", map[string]string{"Idempotency-Key": fmt.Sprintf("%s-%d", key, i)}, struct{}{}, &out); err != nil {
				return err
			}
			sessions[i] = &session{id: out.SessionID, api: b.apis[i%len(b.apis)]}
			return nil
		})
	}
	return sessions, g.Wait()
}

// warmClientID is the client message id of each Session's first input.
const warmClientID = "warm"

// warm sends each Session its first input, text, which starts its box, and returns
// the times to their first parts: the cold starts.
func (b *bench) warm(ctx context.Context, sessions []*session, text string) (samples, error) {
	var mu sync.Mutex
	var cold samples
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range sessions {
		g.Go(func() error {
			r, err := b.turn(gctx, s, 1, text, warmClientID)
			if err != nil {
				return err
			}
			mu.Lock()
			cold = append(cold, r.firstPart)
			mu.Unlock()
			return nil
		})
	}
	return cold, g.Wait()
}

// measuredTurns has every Session send the bench's turns of text, one after the
// other, with followers streams open for each, and returns their receipts, times to
// first part and each Session's part arrivals.
func (b *bench) measuredTurns(ctx context.Context, sessions []*session, followers int, text string) (receipts, firsts samples, arrivals map[string][]map[int64]time.Time, err error) {
	var mu sync.Mutex
	arrivals = map[string][]map[int64]time.Time{}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range sessions {
		g.Go(func() error {
			for t := range b.opts.Turns {
				r, err := b.turn(gctx, s, followers, text, fmt.Sprintf("m%d", t))
				if err != nil {
					return err
				}
				mu.Lock()
				receipts = append(receipts, r.receipt)
				firsts = append(firsts, r.firstPart)
				arrivals[s.id] = append(arrivals[s.id], r.arrivals...)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, nil, err
	}
	return receipts, firsts, arrivals, nil
}

// scriptedWarm is each scripted Session's first input, answered at once.
const scriptedWarm = "quick"

// scriptedReply is the input whose reply the scripted program streams as the
// bench's deltas, Gap apart.
func scriptedReply(o Options) string {
	return fmt.Sprintf("slow:%d:%d", o.Deltas, o.Gap.Milliseconds())
}

// partFigures reads the measured parts' rows and compares them with what the
// program wrote (at_us) and what the followers received.
type partMeasures struct {
	parts       int
	rate        float64
	eventToPart samples
	commitToSSE samples
}

func (b *bench) partFigures(ctx context.Context, warmSeq map[string]int64, arrivals map[string][]map[int64]time.Time, start time.Time) (partMeasures, error) {
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return partMeasures{}, fmt.Errorf("read parts: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var m partMeasures
	var last time.Time
	for id, after := range warmSeq {
		// A part is durable when its transaction commits, which may be well after the
		// transaction's start (created_at) when many Sessions' batches share it.
		rows, err := conn.Query(ctx, `SELECT seq, pg_xact_commit_timestamp(xmin), frame->>'type', frame->'providerMetadata'->'scriptagent'->>'at_us'
			FROM output_parts WHERE session_id = $1 AND seq > $2`, id, after)
		if err != nil {
			return partMeasures{}, fmt.Errorf("read parts: %w", err)
		}
		for rows.Next() {
			var seq int64
			var committed time.Time
			var typ string
			var atUS *string
			if err := rows.Scan(&seq, &committed, &typ, &atUS); err != nil {
				rows.Close()
				return partMeasures{}, fmt.Errorf("read parts: %w", err)
			}
			m.parts++
			if committed.After(last) {
				last = committed
			}
			if atUS != nil {
				var us int64
				if err := json.Unmarshal([]byte(*atUS), &us); err == nil {
					m.eventToPart = append(m.eventToPart, committed.Sub(time.UnixMicro(us)))
				}
			}
			for _, a := range arrivals[id] {
				if at, ok := a[seq]; ok {
					m.commitToSSE = append(m.commitToSSE, at.Sub(committed))
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return partMeasures{}, fmt.Errorf("read parts: %w", err)
		}
	}
	m.rate = float64(m.parts) / last.Sub(start).Seconds()
	return m, nil
}

// saveWorkerHeap saves the first worker's heap profile as worker-<moment>-heap.pprof
// in the profile folder, in the phase that is profiled: the idle and released
// Sessions' own objects are their profiles less the one with none
// (go tool pprof -diff_base worker-none-heap.pprof worker-idle-heap.pprof).
func (b *bench) saveWorkerHeap(ctx context.Context, profile bool, moment string) error {
	if !profile || b.opts.ProfileDir == "" {
		return nil
	}
	return fetch(ctx, b.workerDebug[0]+"/debug/pprof/heap", filepath.Join(b.opts.ProfileDir, "worker-"+moment+"-heap.pprof"))
}

// heapGoalSessions is the fewest Sessions whose per-Session heap is judged
// against its goal.
const heapGoalSessions = 20

// idleQuiet is how long the Sessions stay quiet before the worker's heap is read for
// idle Sessions: a Session idles between turns far longer than this, after its turn's
// connections and buffers were let go (a runner client keeps an unused connection
// 5 s).
const idleQuiet = 8 * time.Second

// releasedHeap waits until every Session's box was released for idleness (the
// worker's sandbox.idle_release after its last turn) and the worker let go of what
// its runtime held, and reads the worker's heap then.
func (b *bench) releasedHeap(ctx context.Context, sessions []*session) (heapFigures, error) {
	for _, s := range sessions {
		for {
			var out struct {
				RuntimeUnavailable bool `json:"runtime_unavailable"`
			}
			if err := b.api.call(ctx, http.MethodGet, "/sessions/"+s.id, nil, &out); err != nil {
				return heapFigures{}, err
			}
			if out.RuntimeUnavailable {
				break
			}
			select {
			case <-ctx.Done():
				return heapFigures{}, fmt.Errorf("session %s kept its box: %w", s.id, ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	select {
	case <-ctx.Done():
		return heapFigures{}, ctx.Err()
	case <-time.After(idleQuiet):
	}
	return b.workerHeap(ctx)
}

// endedHeap waits until every Session's workflow has ended (archived: its box
// released, its run gone from the worker's cache) and reads the worker's heap after
// idleQuiet.
func (b *bench) endedHeap(ctx context.Context, sessions []*session) (heapFigures, error) {
	tc, err := client.Dial(client.Options{HostPort: b.stack.TemporalAddress(), Logger: nopLogger{}})
	if err != nil {
		return heapFigures{}, fmt.Errorf("dial temporal: %w", err)
	}
	defer tc.Close()
	for _, s := range sessions {
		// Get follows the workflow across continue-as-new to its last run's end.
		if err := tc.GetWorkflow(ctx, workflows.SessionWorkflowID(s.id), "").Get(ctx, nil); err != nil {
			return heapFigures{}, fmt.Errorf("wait for the workflow of archived %s: %w", s.id, err)
		}
	}
	select {
	case <-ctx.Done():
		return heapFigures{}, ctx.Err()
	case <-time.After(idleQuiet):
	}
	return b.workerHeap(ctx)
}

// waitIdle waits until every Session is READY again.
func (b *bench) waitIdle(ctx context.Context, sessions []*session) error {
	for _, s := range sessions {
		for {
			var out struct {
				State string `json:"state"`
			}
			if err := b.api.call(ctx, http.MethodGet, "/sessions/"+s.id, nil, &out); err != nil {
				return err
			}
			if out.State == "READY" {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("session %s stayed %s: %w", s.id, out.State, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// archive archives the phase's Sessions so their boxes are released before the
// next phase. It waits for them to be READY first: the API refuses to archive a
// Session whose program reports working (SESSION_BUSY), and a reply's finish part can
// reach its followers before the program's idle status, a line of its own, is
// recorded.
func (b *bench) archive(ctx context.Context, sessions []*session) error {
	if err := b.waitIdle(ctx, sessions); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, s := range sessions {
		g.Go(func() error { return b.api.call(gctx, http.MethodPost, "/sessions/"+s.id+"/archive", nil, nil) })
	}
	return g.Wait()
}

// heapFigures are a worker's memory after a collection: the bytes of its heap spans
// in use (HeapInuse, what the goal is judged on: it includes the spans' free slots), of
// its live objects alone (HeapAlloc), of its goroutines' stacks (StackInuse, outside
// the heap) and its goroutines.
type heapFigures struct {
	inUse, live, stacks uint64
	goroutines          int
}

// perSession is each of n Sessions' share of what h holds above base, in KiB. The
// spans in use are never fewer than the live objects they hold, but the two readings
// come from different moments of the worker's life, and the base can hold more free
// slots than h (spans the turns before it left partly used): the share of the spans
// is then taken as the live objects' share, the least the Sessions hold.
func (h heapFigures) perSession(base heapFigures, n int) (inUse, live float64) {
	inUse = (float64(h.inUse) - float64(base.inUse)) / float64(n) / 1024
	live = (float64(h.live) - float64(base.live)) / float64(n) / 1024
	return max(inUse, live), live
}

// goroutinesPerSession is each of n Sessions' share of the goroutines and stack
// KiB h holds above base.
func (h heapFigures) goroutinesPerSession(base heapFigures, n int) (goroutines, stackKiB float64) {
	return float64(h.goroutines-base.goroutines) / float64(n),
		(float64(h.stacks) - float64(base.stacks)) / float64(n) / 1024
}

// workerHeap is the workers' heap after a collection, summed over the worker
// processes, read from their debug endpoints (debug.pprof_addr): the heap profile's
// gc=1 collects first (twice, see heapOf).
func (b *bench) workerHeap(ctx context.Context) (heapFigures, error) {
	var total heapFigures
	for _, base := range b.workerDebug {
		h, err := heapOf(ctx, base)
		if err != nil {
			return heapFigures{}, err
		}
		total.inUse += h.inUse
		total.live += h.live
		total.stacks += h.stacks
		total.goroutines += h.goroutines
	}
	return total, nil
}

func heapOf(ctx context.Context, base string) (heapFigures, error) {
	// Two collections: what the first finds in sync.Pools (pgx's, gRPC's and net/http's
	// buffers, sized by the last turns' concurrency) it keeps as their victim caches
	// until the next, which an idle worker runs within minutes on its own.
	for range 2 {
		if err := fetch(ctx, base+"/debug/pprof/heap?gc=1", os.DevNull); err != nil {
			return heapFigures{}, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/vars", nil)
	if err != nil {
		return heapFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return heapFigures{}, fmt.Errorf("worker debug vars: %w", err)
	}
	defer resp.Body.Close()
	var vars struct {
		Memstats struct {
			HeapInuse  uint64 `json:"HeapInuse"`
			HeapAlloc  uint64 `json:"HeapAlloc"`
			StackInuse uint64 `json:"StackInuse"`
		} `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return heapFigures{}, fmt.Errorf("worker debug vars: %w", err)
	}
	goroutines, err := goroutinesOf(ctx, base)
	if err != nil {
		return heapFigures{}, err
	}
	return heapFigures{inUse: vars.Memstats.HeapInuse, live: vars.Memstats.HeapAlloc, stacks: vars.Memstats.StackInuse, goroutines: goroutines}, nil
}

// goroutinesOf is a process's goroutine count, from the first line of its
// goroutine profile ("goroutine profile: total N").
func goroutinesOf(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("worker goroutine profile: %w", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("worker goroutine profile: %w", err)
	}
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		return 0, fmt.Errorf("worker goroutine profile %q: %w", strings.TrimSpace(line), err)
	}
	return n, nil
}

// fetch saves a URL's body to path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	return nil
}

func numCPU() int { return runtime.NumCPU() }

// spread counts the Sessions each worker process holds (by its host task queue).
func (b *bench) spread(ctx context.Context, sessions []*session) (string, error) {
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return "", fmt.Errorf("read placements: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ids := sessionIDs(sessions)
	// A Session whose box was already released for idleness has no host task queue:
	// it is counted apart, not as a worker of its own.
	rows, err := conn.Query(ctx, `SELECT host_task_queue IS NULL, count(*) FROM sessions WHERE id = ANY($1::uuid[])
		GROUP BY host_task_queue ORDER BY 1, 2 DESC`, ids)
	if err != nil {
		return "", fmt.Errorf("read placements: %w", err)
	}
	var parts []string
	var released int64
	var boxless bool
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&boxless, &n}, func() error {
		if boxless {
			released = n
		} else {
			parts = append(parts, strconv.FormatInt(n, 10))
		}
		return nil
	}); err != nil {
		return "", fmt.Errorf("read placements: %w", err)
	}
	spread := strings.Join(parts, " + ")
	if released > 0 {
		spread += fmt.Sprintf(" (%d released)", released)
	}
	return spread, nil
}
