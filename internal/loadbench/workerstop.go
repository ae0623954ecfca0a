package loadbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// The reply each Session streams while a worker ends: long enough (400 deltas 25 ms
// apart, ten seconds) that the end lands in the middle of every one, also when the
// Sessions' replies start seconds apart on a loaded machine.
const (
	stopReplyDeltas = 400
	stopReplyGapMS  = 25
	// stopUnderWay is how many parts every reply has committed before the end.
	stopUnderWay = 5
)

var stopReply = fmt.Sprintf("slow:%d:%d", stopReplyDeltas, stopReplyGapMS)

// workerEnd is how a phase ends a worker: the words its figures use, and the stack's
// call.
type workerEnd struct {
	noun, participle string
	end              func(b *bench, ctx context.Context, name string) error
}

var (
	// killed is a crash: SIGKILL.
	killed = workerEnd{"kill", "killed", func(b *bench, ctx context.Context, name string) error { return b.stack.Kill(ctx, name) }}
	// stopped is a rollout's stop: SIGTERM, and the worker finishes what it can.
	stopped = workerEnd{"stop", "stopped", func(b *bench, ctx context.Context, name string) error { return b.stack.Stop(ctx, name) }}
)

// workerGone checks that streams survive a worker's end while another runs: n new
// Sessions each stream a long reply to their followers, the worker holding the most
// of them is ended (killed or stopped) once every reply is under way, and every
// follower must still read its reply whole (each part once, in order, to its finish)
// through the API it follows, the ended worker's Sessions resumed by the other. It
// reports the replies read whole and, for the ended worker's Sessions, the longest
// their followers waited between two parts.
func (b *bench) workerGone(ctx context.Context, n int, how workerEnd) ([]Row, error) {
	tag := fmt.Sprintf("@%d", n)
	followers := b.opts.followersOf(n)
	b.log.Info("worker "+how.noun, zap.Int("sessions", n), zap.Int("followers", followers))
	sessions, err := b.newSessions(ctx, b.agentID, n, fmt.Sprintf("%s-%d", how.noun, n))
	if err != nil {
		return nil, err
	}
	if _, err := b.warm(ctx, sessions, scriptedWarm); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return nil, fmt.Errorf("worker %s: connect: %w", how.noun, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	hosts, err := hostQueues(ctx, conn, sessions)
	if err != nil {
		return nil, err
	}
	victim, victimPID := b.busiestWorker(hosts)
	onVictim := map[string]bool{}
	for id, q := range hosts {
		onVictim[id] = pidOfHostQueue(q) == victimPID
	}

	from := map[string]int64{}
	for _, s := range sessions {
		from[s.id] = s.last
	}
	results := make(map[string]turnResult, n)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range sessions {
		g.Go(func() error {
			r, err := b.turn(gctx, s, followers, stopReply, "stop")
			if err != nil {
				return err
			}
			mu.Lock()
			results[s.id] = r
			mu.Unlock()
			return nil
		})
	}
	// The end waits until every reply is under way; a reply lasts ten seconds, so
	// none has ended by then.
	if err := waitUnderWay(gctx, conn, from); err != nil {
		_ = g.Wait()
		return nil, err
	}
	if err := how.end(b, ctx, victim); err != nil {
		_ = g.Wait()
		return nil, fmt.Errorf("worker %s: end %s: %w", how.noun, victim, err)
	}
	b.log.Info("worker ended", zap.String("how", how.noun), zap.String("worker", victim), zap.Int("its_sessions", count(onVictim)))
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("worker %s: a reply after %s ended: %w", how.noun, victim, err)
	}

	whole, endedHeld := 0, 0
	var stalls samples
	for _, s := range sessions {
		r := results[s.id]
		broken, err := replyWhole(ctx, conn, s.id, from[s.id], r)
		if err != nil {
			return nil, err
		}
		if broken == "" {
			whole++
		} else {
			b.log.Warn("a reply was not read whole through a worker's end", zap.String("how", how.noun), zap.String("session_id", s.id),
				zap.Bool("on_the_ended_worker", onVictim[s.id]), zap.String("why", broken),
				zap.Strings("worker_log", workerLogLines(b.stack.LogDir(), s.id, workerLogLinesShown)))
		}
		if !onVictim[s.id] {
			continue
		}
		endedHeld++
		stalls = append(stalls, longestStall(r.arrivals[0]))
	}
	if err := b.archive(ctx, sessions); err != nil {
		return nil, err
	}
	return []Row{
		{Figure: "replies whole through a worker's " + how.noun + " " + tag, Goal: "every reply whole",
			P50: fmt.Sprintf("%d of %d (%d on the %s worker)", whole, n, endedHeld, how.participle), Met: met(whole == n && endedHeld > 0)},
		{Figure: "stream stall through a worker's " + how.noun + " " + tag, Goal: "report", P50: msString(stalls.pct(50)), P99: msString(stalls.pct(99))},
	}, nil
}

// busiestWorker returns the name and pid of the worker whose host task queue holds
// the most of the Sessions (hosts: Session id to host task queue).
func (b *bench) busiestWorker(hosts map[string]string) (string, int) {
	held := map[int]int{}
	for _, q := range hosts {
		held[pidOfHostQueue(q)]++
	}
	name, pid := "", 0
	for n, p := range b.stack.WorkerPIDs() {
		if name == "" || held[p] > held[pid] {
			name, pid = n, p
		}
	}
	return name, pid
}

// pidOfHostQueue returns the worker pid a host task queue names
// (<shared>/host/<hostname>-<pid>-<random>), or 0.
func pidOfHostQueue(q string) int {
	_, hostID, ok := strings.Cut(q, "/host/")
	if !ok {
		return 0
	}
	f := strings.Split(hostID, "-")
	if len(f) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(f[len(f)-2])
	if err != nil {
		return 0
	}
	return pid
}

// hostQueues reads each Session's host task queue.
func hostQueues(ctx context.Context, conn *pgx.Conn, sessions []*session) (map[string]string, error) {
	ids := sessionIDs(sessions)
	rows, err := conn.Query(ctx, `SELECT id::text, coalesce(host_task_queue, '') FROM sessions WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("read host task queues: %w", err)
	}
	hosts := map[string]string{}
	var id, q string
	if _, err := pgx.ForEachRow(rows, []any{&id, &q}, func() error { hosts[id] = q; return nil }); err != nil {
		return nil, fmt.Errorf("read host task queues: %w", err)
	}
	return hosts, nil
}

// waitUnderWay waits until every Session has committed stopUnderWay parts after its
// seq in from.
func waitUnderWay(ctx context.Context, conn *pgx.Conn, from map[string]int64) error {
	for {
		behind := 0
		for id, after := range from {
			var parts int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM output_parts WHERE session_id = $1 AND seq > $2`, id, after).Scan(&parts); err != nil {
				return fmt.Errorf("read replies under way: %w", err)
			}
			if parts < stopUnderWay {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d replies did not get under way: %w", behind, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replyWhole says why a follower of the Session's turn did not read each part the log
// holds after from exactly once, in order, or the reply all its deltas; "" when every
// follower did.
func replyWhole(ctx context.Context, conn *pgx.Conn, sessionID string, from int64, r turnResult) (string, error) {
	if r.unordered > 0 {
		return fmt.Sprintf("%d parts out of order over its followers", r.unordered), nil
	}
	for i, at := range r.arrivals {
		last := from
		for seq := range at {
			last = max(last, seq)
		}
		var parts, deltas int
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE frame->>'type' = 'text-delta')
			FROM output_parts WHERE session_id = $1 AND seq > $2 AND seq <= $3`, sessionID, from, last).Scan(&parts, &deltas); err != nil {
			return "", fmt.Errorf("read the reply of %s: %w", sessionID, err)
		}
		if parts != len(at) || deltas != stopReplyDeltas {
			var outcome string
			if err := conn.QueryRow(ctx, `SELECT concat_ws(' ', outcome, native_reason, error::text) FROM responses
				WHERE session_id = $1 AND started_seq > $2 ORDER BY started_seq LIMIT 1`, sessionID, from).Scan(&outcome); err != nil {
				return "", fmt.Errorf("read the response of %s: %w", sessionID, err)
			}
			return fmt.Sprintf("follower %d read %d parts to seq %d, where the log holds %d with %d deltas of %d; the response: %s",
				i, len(at), last, parts, deltas, stopReplyDeltas, outcome), nil
		}
	}
	return "", nil
}

// longestStall is the longest wait between two parts arriving one after the other on
// a follower: the end's, for a Session of the ended worker, since its parts committed
// before the end may still arrive after it.
func longestStall(arrivals map[int64]time.Time) time.Duration {
	times := make([]time.Time, 0, len(arrivals))
	for _, at := range arrivals {
		times = append(times, at)
	}
	slices.SortFunc(times, time.Time.Compare)
	var longest time.Duration
	for i := 1; i < len(times); i++ {
		longest = max(longest, times[i].Sub(times[i-1]))
	}
	return longest
}

func count(set map[string]bool) int {
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	return n
}

// workerLogLinesShown is how many of the workers' log lines about a Session a
// warning about its reply carries.
const workerLogLinesShown = 12

// workerLogLines returns the last most lines, by time, of the stack's worker logs in
// dir that name the Session, each after its log's name, cut to a readable length: where a
// test's output is all a failed run leaves (CI keeps no stack logs), they say what
// the workers saw of the Session (an activity's error names its cause).
func workerLogLines(dir, sessionID string, most int) []string {
	logs, _ := filepath.Glob(filepath.Join(dir, "worker*.log"))
	type logLine struct{ at, text string }
	var found []logLine
	for _, name := range logs {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, sessionID) {
				const keep = 400
				if len(line) > keep {
					line = line[:keep] + "..."
				}
				// A line starts with its time of day: the logs interleave by it.
				at, _, _ := strings.Cut(line, "\t")
				found = append(found, logLine{at, filepath.Base(name) + ": " + line})
			}
		}
		f.Close()
	}
	slices.SortStableFunc(found, func(a, b logLine) int { return strings.Compare(a.at, b.at) })
	lines := make([]string, 0, min(most, len(found)))
	for _, l := range found[max(0, len(found)-most):] {
		lines = append(lines, l.text)
	}
	return lines
}
