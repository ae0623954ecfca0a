package loadbench

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox/local"
)

// claudePhase measures the time to first part on the real Claude Code: n Sessions
// of the stack's Claude Code Agent, each sending the bench's turns to the stack's
// scripted model server, beside the floor of the same pinned program run directly
// in n boxes of the floor's own backend against the same model server (submit to
// the response's first event: Claude Code's echo of the input it took).
func (b *bench) claudePhase(ctx context.Context, n int, floorOpts local.Options) ([]Row, string, error) {
	o := b.opts
	tag := fmt.Sprintf("(Claude Code) @%d", n)
	followers := o.followersOf(n)
	reply := claudeReply(o)
	b.log.Info("Claude Code phase", zap.Int("sessions", n), zap.Int("followers", followers))

	prog, err := claudeFloorProgram(b.root)
	if err != nil {
		return nil, "", fmt.Errorf("claude code: %w", err)
	}
	fb, err := startFloorBoxes(ctx, n, floorOpts, prog, b.log.Named("floor"))
	if err != nil {
		return nil, "", err
	}
	floorCPU := takeCPU()
	floor, err := fb.run(ctx, claudeWarm, o.Turns, reply)
	floorCores := takeCPU().coresSince(floorCPU)
	if cerr := fb.close(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", err
	}

	sessions, err := b.newSessions(ctx, b.stack.AgentID, n, fmt.Sprintf("bench-claude-%d", n))
	if err != nil {
		return nil, "", err
	}
	cold, err := b.warm(ctx, sessions, claudeWarm)
	if err != nil {
		return nil, "", err
	}
	sourcesBefore, err := b.handOverSources(ctx)
	if err != nil {
		return nil, "", err
	}
	cpuBefore := takeCPU()
	_, firsts, _, err := b.measuredTurns(ctx, sessions, followers, reply)
	if err != nil {
		return nil, "", err
	}
	cores := takeCPU().coresSince(cpuBefore)
	if err := b.waitIdle(ctx, sessions); err != nil {
		return nil, "", err
	}
	handOver, err := b.handOvers(ctx, sessions, sourcesBefore)
	if err != nil {
		return nil, "", err
	}
	if err := b.archive(ctx, sessions); err != nil {
		return nil, "", err
	}
	pf := floor.firstOutput.pct(99)
	b.log.Info("Claude Code phase done", zap.Int("sessions", n),
		zap.Duration("floor_first_output_p50", floor.firstOutput.pct(50)), zap.Duration("floor_first_output_p99", pf))
	rows := []Row{{Figure: "time to first part " + tag, Goal: "p99 - floor <= 50 ms", P50: msString(firsts.pct(50)), P99: msString(firsts.pct(99)),
		Floor: msString(pf), Ratio: latencyRatio(pf, firsts.pct(99)), Met: met(firsts.pct(99)-pf <= 50*time.Millisecond)}}
	rows = append(rows, handOver.rows(tag)...)
	rows = append(rows, Row{Figure: "cold start (box + runtime) " + tag, Goal: "report", P50: msString(cold.pct(50)), P99: msString(cold.pct(99))})
	return rows, fmt.Sprintf("cores used during the measured turns %s: %s (of %d)\ncores used by the program floor %s: %s (of %d)",
		tag, cpuLine(cores), numCPU(), tag, cpuLine(floorCores), numCPU()), nil
}

// claudeReply is the input the scripted model server answers with the bench's
// deltas, Gap apart.
func claudeReply(o Options) string {
	return fmt.Sprintf("[[script:slow chunks=%d delay=%dms]]", o.Deltas, o.Gap.Milliseconds())
}

// claudeWarm is each Claude Code Session's first input, which brings its box and
// program up.
const claudeWarm = "[[script:text text=ready]]"
