// Package soak drives many Sessions through many turns on a fault stack while
// it injects a random fault every few seconds, then audits every Session:
// inputs accepted, answered exactly once, lost or answered twice, repeated or
// missing stream parts, responses without an outcome, Sessions TERMINATED,
// and how long the platform took to answer again after each fault.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/faultstack"
)

// Options shape a soak.
type Options struct {
	// Sessions run side by side, each taking Turns turns one after another.
	Sessions, Turns int
	// FaultEvery is the pause between the recovery from one fault and the next.
	FaultEvery time.Duration
	// Faults are the kinds to draw from (faultstack.Fault*); default all.
	Faults []string
	// Duration bounds the turns; the final audit gets SettleTimeout more.
	Duration time.Duration
	// TurnTimeout bounds one turn; a turn that takes longer counts as a
	// response without an outcome and the Session moves on.
	TurnTimeout time.Duration
	// SettleTimeout bounds the wait for every Session to come to rest.
	SettleTimeout time.Duration
	// TurnPause, when set, has a Session wait a drawn time below it after each turn:
	// with the workers' idle release shorter than it, some turns start on a Session
	// whose box was released (its run ended), some as the release runs, and some on
	// its live box.
	TurnPause time.Duration
	// Seed makes the turn and fault choices repeatable.
	Seed uint64
	// Log receives progress lines; default none.
	Log io.Writer
}

// AllFaults are the fault kinds a soak draws from by default.
var AllFaults = []string{faultstack.FaultWorker, faultstack.FaultAPI, faultstack.FaultBox, faultstack.FaultPostgres, faultstack.FaultTemporal}

func (o Options) withDefaults() Options {
	if o.Sessions <= 0 {
		o.Sessions = 3
	}
	if o.Turns <= 0 {
		o.Turns = 3
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = 20 * time.Second
	}
	if len(o.Faults) == 0 {
		o.Faults = AllFaults
	}
	if o.Duration <= 0 {
		o.Duration = 15 * time.Minute
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = 3 * time.Minute
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Run soaks the stack and returns the figures.
func Run(ctx context.Context, s *faultstack.Stack, k *faultstack.Checker, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	r := newReport()
	started := time.Now()
	turnsCtx, stopTurns := context.WithTimeout(ctx, opts.Duration)
	defer stopTurns()
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed))
	var rngMu sync.Mutex
	draw := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}

	probe, err := s.Client.CreateSession(ctx, s.AgentID, "soak-probe")
	if err != nil {
		return nil, fmt.Errorf("create the probe Session: %w", err)
	}
	sessions := make([]string, opts.Sessions)
	for i := range sessions {
		if sessions[i], err = s.Client.CreateSession(ctx, s.AgentID, fmt.Sprintf("soak-%d", i)); err != nil {
			return nil, fmt.Errorf("create Session %d: %w", i, err)
		}
	}
	d := &driver{s: s, k: k, opts: opts, r: r, draw: draw}
	var wg sync.WaitGroup
	for i, sid := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.converse(turnsCtx, i, sid)
		}()
	}
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		d.injectFaults(turnsCtx, ctx, probe, sessions)
	}()
	wg.Wait()
	stopTurns()
	<-faultsDone

	settleCtx, cancel := context.WithTimeout(ctx, opts.SettleTimeout)
	defer cancel()
	if healed, err := s.Heal(settleCtx); err != nil {
		return r, fmt.Errorf("restart what the faults left down (%v): %w", healed, err)
	}
	for _, sid := range append(sessions, probe) {
		if _, err := s.Client.WaitSession(settleCtx, sid, "the Session to settle", faultstack.Settled); err != nil {
			r.note("session %s did not settle: %v", sid, err)
		}
		a, err := s.Client.Audit(settleCtx, k, sid)
		if err != nil {
			r.note("audit session %s: %v", sid, err)
			continue
		}
		r.addAudit(a)
	}
	r.Crashes = s.Crashed()
	r.Elapsed = time.Since(started)
	return r, nil
}

// driver runs the Sessions' turns and the faults.
type driver struct {
	s    *faultstack.Stack
	k    *faultstack.Checker
	opts Options
	r    *Report
	draw func(int) int
}

// converse takes the Session through its turns, one after another.
func (d *driver) converse(ctx context.Context, index int, sid string) {
	for turn := 0; turn < d.opts.Turns && ctx.Err() == nil; turn++ {
		t := d.pickTurn(fmt.Sprintf("s%d-t%d", index, turn))
		turnCtx, cancel := context.WithTimeout(ctx, d.opts.TurnTimeout)
		err := d.turn(turnCtx, sid, t, fmt.Sprintf("soak-%d-%d", index, turn))
		cancel()
		if err != nil {
			d.r.note("session %d turn %d: %v", index, turn, err)
		}
		fmt.Fprintf(d.opts.Log, "session %d turn %d done (err %v)\n", index, turn, err)
		if err == nil && d.opts.TurnPause > 0 && !d.pause(ctx) {
			return
		}
		if err != nil {
			// A TERMINATED Session takes no message: its remaining turns would
			// only repeat the refusal.
			if view, verr := d.s.Client.Session(ctx, sid); verr == nil && view.State == faultstack.StateTerminated {
				d.r.note("session %d TERMINATED after turn %d; its %d remaining turns skipped", index, turn, d.opts.Turns-turn-1)
				return
			}
		}
	}
}

// pause waits a drawn time below TurnPause; false when ctx ended first.
func (d *driver) pause(ctx context.Context) bool {
	t := time.NewTimer(time.Duration(d.draw(max(1, int(d.opts.TurnPause.Milliseconds())))) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pickTurn draws a reply of varied length, or a command that needs approval.
func (d *driver) pickTurn(tag string) faultstack.Turn {
	switch d.draw(4) {
	case 0:
		return faultstack.TextTurn(tag)
	case 1:
		return faultstack.BashTurn(tag, "echo "+tag)
	default:
		words := 5 + d.draw(60)
		chunks := 2 + d.draw(30)
		return faultstack.SlowTurn(tag, words, chunks, time.Duration(100+d.draw(300))*time.Millisecond)
	}
}

// turn sends one message and follows its response to the end, approving
// every command through the API, then checks the reply text.
func (d *driver) turn(ctx context.Context, sid string, t faultstack.Turn, clientMessageID string) error {
	c := d.s.Client
	receipt, err := c.Send(ctx, sid, t.Content, clientMessageID)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	d.r.accepted()
	asked := func(p faultstack.Part) bool { return p.Type == faultstack.PartApprovalRequest }
	tr, err := c.Follow(ctx, sid, receipt.OutputSeq, faultstack.FollowOptions{Until: asked})
	for err == nil && !tr.Done {
		view, werr := c.WaitSession(ctx, sid, "the pending approval", func(v faultstack.SessionView) bool { return v.PendingInteraction != nil })
		if werr != nil {
			err = werr
			break
		}
		if err = c.Answer(ctx, sid, view.PendingInteraction.InteractionID, faultstack.DecisionApprove); err != nil {
			break
		}
		var rest faultstack.Transcript
		rest, err = c.Follow(ctx, sid, tr.Last(), faultstack.FollowOptions{Until: asked})
		tr = tr.Append(rest)
	}
	if errors.Is(err, faultstack.ErrSequence) {
		d.r.sequenceProblem()
	}
	if err != nil {
		return fmt.Errorf("follow: %w", err)
	}
	msg, err := d.k.Reply(ctx, tr)
	if err != nil {
		if ctx.Err() == nil {
			d.r.sequenceProblem()
		}
		return err
	}
	if got := faultstack.Text(msg); got != t.Reply {
		// A response that ended failed (its box was killed) keeps the text it
		// had; only a completed response must carry the whole reply.
		view, err := c.Session(ctx, sid)
		if err != nil {
			return fmt.Errorf("read the response's outcome: %w", err)
		}
		if last := view.LastResponse; last != nil && last.Outcome != nil && *last.Outcome != faultstack.OutcomeComplete && slices.Contains(last.InputIDs, receipt.InputID) {
			return fmt.Errorf("response ended %s (%s) with %q", *last.Outcome, ptrString(last.NativeReason), got)
		}
		d.r.wrongText()
		return fmt.Errorf("reply %q, want %q", got, t.Reply)
	}
	return nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// injectFaults waits FaultEvery, injects a random fault, then measures the
// recovery: how long until a new message on the probe Session is answered.
// It injects until turnsCtx ends; a recovery under way is measured to its end
// under ctx.
func (d *driver) injectFaults(turnsCtx, ctx context.Context, probe string, sessions []string) {
	for n := 0; ; n++ {
		select {
		case <-turnsCtx.Done():
			return
		case <-time.After(d.opts.FaultEvery):
		}
		kind := d.opts.Faults[d.draw(len(d.opts.Faults))]
		start := time.Now()
		err := d.inject(ctx, kind, sessions)
		if err != nil {
			d.r.note("fault %s: %v", kind, err)
			continue
		}
		if _, err := d.s.Heal(ctx); err != nil {
			d.r.note("after fault %s: %v", kind, err)
		}
		probeCtx, cancel := context.WithTimeout(ctx, d.opts.TurnTimeout)
		err = d.turn(probeCtx, probe, faultstack.TextTurn(fmt.Sprintf("probe-%d", n)), fmt.Sprintf("probe-%d", n))
		cancel()
		if err != nil {
			d.r.note("probe after fault %s: %v", kind, err)
			d.r.fault(kind, 0, false)
			continue
		}
		d.r.fault(kind, time.Since(start), true)
		fmt.Fprintf(d.opts.Log, "fault %s recovered in %s\n", kind, time.Since(start).Round(time.Millisecond))
	}
}

func (d *driver) inject(ctx context.Context, kind string, sessions []string) error {
	switch kind {
	case faultstack.FaultWorker:
		return d.s.RestartWorker(ctx)
	case faultstack.FaultAPI:
		return d.s.RestartAPI(ctx)
	case faultstack.FaultPostgres:
		return d.s.RestartPostgres(ctx)
	case faultstack.FaultTemporal:
		return d.s.RestartTemporal(ctx)
	case faultstack.FaultBox:
		// A Session between boxes has none to kill; try the others.
		start := d.draw(len(sessions))
		var errs []error
		for i := range sessions {
			if _, err := d.s.KillBox(ctx, sessions[(start+i)%len(sessions)]); err != nil {
				errs = append(errs, err)
				continue
			}
			return nil
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("unknown fault kind %q", kind)
}
