package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// Relay is the Session's one reader: a long-running activity on the host task queue
// of the worker holding the live connection. It takes the reader lease (fencing any
// earlier reader), reads the runtime's events after the stored cursor and records
// them (parts, responses, interactions, admissions, status) with the cursor in one
// transaction per batch, fenced by its lease generation. It heartbeats its progress
// (its worker renews the leases of all its Relays at once), ends with RelayStopped
// when StopRelay names it or when its context is cancelled, and returns
// RelayConnectionLost when the connection drops so the workflow can reconnect. A
// RuntimeCursorExpired is reconciled from the runtime's own State, as the engine
// contract prescribes, and reading continues from the cursor State names, or from
// the start of a runtime incarnation the platform has recorded nothing of.
func (a *Activities) Relay(ctx context.Context, req RelayRequest) (RelayResult, error) {
	ref := req.RuntimeRef
	l, err := a.live.get(ref.SessionID, ref.RuntimeGeneration)
	if err != nil {
		return RelayResult{}, err
	}
	// Temporal passes a cancellation on only in a heartbeat's reply, and a Relay
	// heartbeats seldom (Settings.RelayHeartbeatEvery): its workflow stops it through
	// StopRelay on this worker, which ends this context.
	activityCtx := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if !l.beginRelay(req.RelayID, stop) {
		return RelayResult{End: RelayStopped}, nil
	}
	defer l.endRelay(req.RelayID)
	info := activity.GetInfo(ctx)
	holder := fmt.Sprintf("%s/%s/%d", a.deps.HostTaskQueue, info.ActivityID, info.Attempt)
	// The workflow starts a Relay only when the previous one ended or timed out, so
	// it steals: the generation bump fences a reader that is still running somewhere.
	lease, err := a.deps.Store.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: ref.SessionID, Holder: holder, TTL: a.set.LeaseTTL, Steal: true})
	if err != nil {
		return RelayResult{}, fmt.Errorf("acquire reader lease: %w", err)
	}
	l.setLease(lease.Generation)
	r := &relayRun{a: a, l: l, lease: lease.Generation, log: a.logger(ctx, ref.SessionID).WithLazy(zap.Int64("lease_generation", lease.Generation))}
	res, err := r.run(ctx)
	r.titling.Wait()
	if ctx.Err() != nil && activityCtx.Err() == nil {
		return r.result(RelayStopped), nil
	}
	if errors.Is(err, store.ErrLeaseLost) {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeLeaseLost, err)
	}
	return res, err
}

// StopRelay ends the Session's Relay req names on this worker (the host queue of its
// runtime), which returns RelayStopped, or keeps it from beginning if StopRelay comes
// first. A Relay of another runtime generation, or a later one of the same, is left
// alone; with no live runtime here the Relay has ended already, or never begins.
func (a *Activities) StopRelay(_ context.Context, req StopRelayRequest) error {
	if l := a.live.lookup(req.SessionID); l != nil && l.generation == req.RuntimeGeneration {
		l.stopRelay(req.RelayID)
	}
	return nil
}

// relayRun is one Relay's reading state.
type relayRun struct {
	a     *Activities
	l     *liveRuntime
	lease int64
	log   *zap.Logger
	// throughSeq is the seq of the last part recorded, which the heartbeat
	// reports; alive is when the reading loop last went round (unix nanoseconds),
	// which the heartbeat vouches for.
	throughSeq atomic.Int64
	alive      atomic.Int64
	// leaseLost says why the lease is no longer this reader's (the worker's
	// leaseKeeper renews it).
	leaseLost <-chan error
	// model is the model name this reader last recorded.
	model string
	// observed is the observation of the Session this reader last sent its workflow;
	// processingSince is when an observation first found the Session PROCESSING
	// while observed did not say so (zero otherwise).
	observed        SessionObservation
	processingSince time.Time
	// ended is set by record when its batch ended a response.
	ended bool
	// factsChanged is set by record when its batch wrote more than parts (a status,
	// a response start or end, an admission, an interaction): what the Session's
	// observation derives from. observeAsked is when the loop last asked for an
	// observation, which reportToTemporal makes a second after an ask (observeNow).
	factsChanged bool
	observeAsked time.Time
	observeNow   chan struct{}
	// listening is set once the input-notice goroutine listens and delivered what
	// was held then; observations carry it to the workflow.
	listening atomic.Bool
	// titling runs the automatic title in flight, if any; titleTried are the
	// responses a title was asked from.
	titling    sync.WaitGroup
	titleBusy  atomic.Bool
	titleTried map[string]bool
}

// eventOrErr is one item of a runtime's event sequence.
type eventOrErr struct {
	ev  engines.Event
	err error
	// read is when the Relay read the event from the runtime, for the relay lag metric.
	read time.Time
}

func (r *relayRun) run(ctx context.Context) (RelayResult, error) {
	st := r.a.deps.Store
	var cursor *engines.RuntimeCursor
	saved, err := st.GetRuntimeCursorBySession(ctx, r.l.sessionID)
	switch {
	case err == nil:
		cursor = &engines.RuntimeCursor{Generation: saved.Generation, Position: saved.Position}
		r.throughSeq.Store(saved.ThroughSeq)
	case errors.Is(err, store.ErrNotFound):
	default:
		return RelayResult{}, err
	}
	r.alive.Store(time.Now().UnixNano())
	lost, releaseLease := r.a.leases.hold(store.LeaseRef{SessionID: r.l.sessionID, Generation: r.lease}, &r.alive)
	defer releaseLease()
	r.leaseLost = lost
	background, stopBackground := context.WithCancel(ctx)
	var helpers sync.WaitGroup
	defer func() {
		stopBackground()
		helpers.Wait()
	}()
	r.observeNow = make(chan struct{}, 1)
	r.observeAsked = time.Now()
	if r.a.deps.Notices != nil {
		// The first observation waits for the input-notice listener, so it says
		// whether this Relay delivers on notice: one signal, not two.
		helpers.Go(func() { r.deliverOnNotice(background) })
	} else {
		r.wakeObserver()
	}
	helpers.Go(func() { r.reportToTemporal(background) })
	for {
		err := r.readFrom(ctx, cursor)
		switch {
		case errors.Is(err, engines.ErrRuntimeCursorExpired):
			r.log.Info("runtime cursor expired; reconciling from the runtime's state", zap.Error(err))
			if cursor, err = r.reconcile(ctx, cursor); err != nil {
				return r.result(""), err
			}
			if _, err := r.a.deliverHeld(ctx, r.l, 0); err != nil {
				return r.result(""), err
			}
		case errors.Is(err, engines.ErrRuntimeConnectionLost):
			r.log.Info("runtime connection lost", zap.Error(err))
			r.a.live.remove(r.l)
			return r.result(RelayConnectionLost), nil
		case err != nil:
			return r.result(""), err
		default:
			if ctx.Err() != nil {
				return r.result(""), ctx.Err()
			}
			// The sequence ended without an error while ctx lives: the adapter saw
			// the connection end. Treat it as a lost connection.
			r.a.live.remove(r.l)
			return r.result(RelayConnectionLost), nil
		}
	}
}

func (r *relayRun) result(end RelayEnd) RelayResult {
	return RelayResult{End: end, ThroughSeq: r.throughSeq.Load()}
}

// readFrom reads and records events after cursor until the sequence ends or fails,
// ctx ends, or a write fails.
func (r *relayRun) readFrom(ctx context.Context, cursor *engines.RuntimeCursor) error {
	evCtx, stop := context.WithCancel(ctx)
	queue := newEventQueue(r.a.set.MaxBatch)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer queue.close()
		for ev, err := range r.l.client.Events(evCtx, cursor) {
			if !queue.push(evCtx, eventOrErr{ev, err, time.Now()}) || err != nil {
				return
			}
		}
	}()
	defer func() {
		stop()
		<-readerDone
	}()
	tick := time.NewTicker(r.a.set.HeartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.alive.Store(time.Now().UnixNano())
		case err := <-r.leaseLost:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-queue.ready:
			// Everything queued is one batch, so one transaction records it all.
			batch, done := queue.take()
			if done {
				return nil
			}
			if len(batch) == 0 {
				continue
			}
			next, err := r.record(ctx, queue, batch, cursor)
			cursor = next
			if err != nil {
				return err
			}
			if err := r.recordModel(ctx); err != nil {
				return err
			}
			r.alive.Store(time.Now().UnixNano())
			if r.factsChanged || time.Since(r.observeAsked) >= observeEvery {
				r.factsChanged = false
				r.askObservation()
			}
			if r.ended {
				r.ended = false
				r.maybeTitle(ctx)
			}
		}
	}
}

// observeEvery bounds how long a Relay streaming only parts goes without reading
// the Session's facts again (parts change no observed fact, but the Session's held
// inputs and title change outside the Relay), and is how long an observation the
// workflow only shows waits for the Session to settle.
const observeEvery = time.Second

// processingShownAfter is how long observations must have found a Session
// PROCESSING before one says so: a turn shorter than that is never shown as
// PROCESSING and costs its workflow no signal, where a turn over a second cost two
// (PROCESSING, then READY), each a workflow task. With 100 Sessions in short turns
// those signals were most of what Temporal did during the turns. A state an
// operator acts on (WAITING_INPUT, a Session back to READY after it was shown
// PROCESSING) still goes after observeEvery.
const processingShownAfter = 5 * time.Second

// askObservation has reportToTemporal observe the Session soon; asks made
// while it waits become one observation, of the facts as they are then.
func (r *relayRun) askObservation() {
	r.observeAsked = time.Now()
	r.wakeObserver()
}

// wakeObserver has reportToTemporal observe the Session soon, from any
// goroutine.
func (r *relayRun) wakeObserver() { wake(r.observeNow) }

// reportToTemporal makes the Relay's calls to Temporal, from one goroutine beside
// the reading loop: each call holds the SDK's lock for as long as the server takes to
// answer (with 100 Sessions a signal took 3.5 s and a heartbeat 0.5 s), and made from
// the loop each held the Session's parts back behind it.
//
// Every RelayHeartbeatEvery it heartbeats, while the loop has gone round lately (each
// batch, and each HeartbeatEvery while it waits), so a stuck loop still lets the
// heartbeat timeout fire; the worker's leaseKeeper stops renewing that loop's lease
// the same way. The heartbeats are seldom because, at one a Relay every few seconds,
// they were most of what Temporal did for a hundred busy Sessions: the workflow stops
// its Relay through StopRelay instead of the cancellation a heartbeat's reply brings.
//
// An ask is answered observeEvery later, with the facts as they are then, and asks
// made meanwhile join it: the workflow only shows the Session's state to operators,
// so a turn that goes from held to working to ready within a second costs it no
// signal, a longer one two (working, then ready), and the last state is always the
// one sent. Whether this Relay delivers inputs on notice is the exception: the
// workflow delivers them itself until told, so that goes at once.
func (r *relayRun) reportToTemporal(ctx context.Context) {
	every := r.a.set.HeartbeatEvery
	tick := time.NewTicker(r.a.set.RelayHeartbeatEvery)
	defer tick.Stop()
	settle := time.NewTimer(observeEvery)
	settle.Stop()
	settling := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if time.Since(time.Unix(0, r.alive.Load())) <= 2*every {
				activity.RecordHeartbeat(ctx, RelayProgress{LeaseGeneration: r.lease, ThroughSeq: r.throughSeq.Load()})
			}
		case <-r.observeNow:
			switch {
			case r.listening.Load() != r.observed.DeliversOnNotice:
				r.observe(ctx)
			case !settling:
				settling = true
				settle.Reset(observeEvery)
			}
		case <-settle.C:
			settling = false
			if wait := r.observe(ctx); wait > 0 {
				settling = true
				settle.Reset(wait)
			}
		}
	}
}

// observe sends the Session's workflow the Session as the platform derives it, when
// that changed since the last observation sent: the workflow keeps its search
// attribute and current details with it. A PROCESSING not yet shown waits until it
// has lasted processingShownAfter: observe then returns how long is left, and the
// caller observes again after it (a change of DeliversOnNotice goes at once). A
// failed signal is logged and sent with the next change; it never stops the reader.
func (r *relayRun) observe(ctx context.Context) time.Duration {
	facts, err := r.a.deps.Store.GetSessionFactsByID(ctx, r.l.sessionID)
	if err != nil {
		r.log.Warn("observe session", zap.Error(err))
		return 0
	}
	obs := observationOf(facts)
	obs.DeliversOnNotice = r.listening.Load()
	wait := r.processingLeft(obs, time.Now())
	if obs == r.observed || (wait > 0 && obs.DeliversOnNotice == r.observed.DeliversOnNotice) {
		return wait
	}
	info := activity.GetInfo(ctx)
	err = activity.GetClient(ctx).SignalWorkflow(ctx, info.WorkflowExecution.ID, "", SignalSessionObserved, obs)
	if err != nil {
		r.log.Warn("signal session observation", zap.Error(err))
		return 0
	}
	r.observed = obs
	return 0
}

// processingLeft is how much longer obs, read at now, must wait before it may show
// the Session PROCESSING: zero for another state or one already shown PROCESSING.
func (r *relayRun) processingLeft(obs SessionObservation, now time.Time) time.Duration {
	if obs.State != string(store.StateProcessing) || r.observed.State == obs.State {
		r.processingSince = time.Time{}
		return 0
	}
	if r.processingSince.IsZero() {
		r.processingSince = now
	}
	return max(0, r.processingSince.Add(processingShownAfter).Sub(now))
}

// recordModel saves the model the program names for its runtime once it has said or
// changed it (Claude Code names it in the init message of each turn).
func (r *relayRun) recordModel(ctx context.Context) error {
	model := reportedModel(r.l.client)
	if model == "" || model == r.model {
		return nil
	}
	if _, err := r.a.deps.Store.SetSessionModelName(ctx, r.l.sessionID, r.lease, model); err != nil {
		return fmt.Errorf("record model name: %w", err)
	}
	r.model = model
	return nil
}

// record writes the events of a batch (up to an error item, which it returns). A
// batch that admits an input may take more of queue while the session log is read
// (write).
func (r *relayRun) record(ctx context.Context, queue *eventQueue, batch []eventOrErr, cursor *engines.RuntimeCursor) (*engines.RuntimeCursor, error) {
	b := pendingBatch{last: cursor, read: batch[0].read}
	if err := b.add(r, batch); err != nil {
		return cursor, err
	}
	if b.last != cursor {
		res, err := r.write(ctx, queue, &b)
		if err != nil {
			return cursor, err
		}
		r.ended = r.ended || b.ends
		r.throughSeq.Store(res.LastSeq)
		r.a.metrics.Admitted(res.Admitted)
		r.a.metrics.PartsCommitted.Add(float64(res.Parts))
		r.a.metrics.RelayLag.WithLabelValues(batchKind(b.ops, b.admits)).Observe(time.Since(b.read).Seconds())
		if err := r.l.client.Committed(ctx, *b.last); err != nil {
			r.log.Warn("tell runtime what is committed", zap.Error(err))
		}
		if b.ends {
			// A response's tail may reach the native log after its end event (Claude
			// Code writes its transcript 70-250 ms after stdout): what is there now is
			// mirrored, the rest with the next admission or before the box is released.
			if err := r.mirrorAfterEnd(ctx); err != nil {
				r.log.Warn("mirror session log after a response ended", zap.Error(err))
			}
		}
	}
	return b.last, b.itemErr
}

// pendingBatch is a batch's records as its events are translated.
type pendingBatch struct {
	ops []store.RelayOp
	// last is the cursor after the last event taken; itemErr the error item the
	// batch ends at, if any.
	last    *engines.RuntimeCursor
	itemErr error
	// admits and ends say the batch admits an input or ends a response.
	admits, ends bool
	// read is when the Relay read the batch's first event.
	read time.Time
}

// add translates events into the batch, up to an error item.
func (b *pendingBatch) add(r *relayRun, events []eventOrErr) error {
	for _, it := range events {
		if it.err != nil {
			b.itemErr = it.err
			return nil
		}
		evOps, err := opsFor(it.ev, r.a.set.DiagnosticsKept)
		if err != nil {
			return err
		}
		if len(evOps) == 0 {
			r.log.Debug("runtime event with no record", zap.String("event_type", string(it.ev.Type())))
		}
		for _, op := range evOps {
			b.ops = append(b.ops, op)
			r.factsChanged = r.factsChanged || op.Part == nil
			b.admits = b.admits || op.AdmitInput != ""
			b.ends = b.ends || op.EndResponse != nil
		}
		c := it.ev.EventCursor()
		b.last = &c
	}
	return nil
}

// relayBatch is the batch as the store writes it, fenced by the Relay's lease.
func (b *pendingBatch) relayBatch(r *relayRun) store.RelayBatch {
	return store.RelayBatch{SessionID: r.l.sessionID, LeaseGeneration: r.lease, Ops: b.ops, Cursor: cursorUpdate(*b.last)}
}

// write records a batch. One that admits an input keeps the session-log barrier: an
// engine reports an input admitted once its native log holds it, and the platform
// records the admission only with a mirror that covers that log, written in the
// batch's own transaction. A box lost right after the admission is then restored with
// the input; an unmirrored one stays held and is sent again, never recorded admitted
// and lost. When the mirror turns out to hold fewer entries than its cursor counted
// (rows gone since), the log is mirrored whole on its own first.
//
// The events the runtime sent while the log was read (a reply's first parts, most
// often) join the admission's transaction, which saves the reply a commit before it
// shows; they stop before an event that admits another input, whose own log entry the
// read may have missed.
func (r *relayRun) write(ctx context.Context, queue *eventQueue, b *pendingBatch) (store.AppendResult, error) {
	if !b.admits {
		return r.a.deps.Store.ApplyRelayBatch(ctx, b.relayBatch(r))
	}
	logOps, mirrored, err := r.a.sessionLogOps(ctx, r.l)
	if err != nil {
		return store.AppendResult{}, fmt.Errorf("mirror session log before recording an admission: %w", err)
	}
	if b.itemErr == nil {
		if err := b.add(r, queue.takeUntil(admitsAnInput)); err != nil {
			mirrored(false)
			return store.AppendResult{}, err
		}
	}
	withLog := b.relayBatch(r)
	withLog.Ops = append(logOps, withLog.Ops...)
	res, err := r.a.deps.Store.ApplyRelayBatch(ctx, withLog)
	mirrored(err == nil)
	if !errors.Is(err, store.ErrSessionLogBehind) {
		return res, err
	}
	if err := r.a.mirrorSessionLog(ctx, r.l); err != nil {
		return store.AppendResult{}, fmt.Errorf("mirror session log before recording an admission: %w", err)
	}
	return r.a.deps.Store.ApplyRelayBatch(ctx, b.relayBatch(r))
}

// mirrorAfterEnd mirrors what the native log holds once a response ended, as a
// batch of the Relay's own: it joins the batches other Relays hand in at the same
// time, a statement for all their logs and one commit, and is its one statement
// only when it meets none. A log whose rows are behind its cursor (rows gone since)
// is mirrored whole on its own.
func (r *relayRun) mirrorAfterEnd(ctx context.Context) error {
	ops, mirrored, err := r.a.sessionLogOps(ctx, r.l)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		mirrored(true) // nothing to write; what was read is passed
		return nil
	}
	_, err = r.a.deps.Store.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: r.l.sessionID, LeaseGeneration: r.lease, Ops: ops})
	mirrored(err == nil)
	if errors.Is(err, store.ErrSessionLogBehind) {
		return r.a.mirrorSessionLog(ctx, r.l)
	}
	return err
}

// admitsAnInput reports whether the queued item is an input's admission.
func admitsAnInput(it eventOrErr) bool {
	_, admits := it.ev.(engines.InputAdmitted)
	return admits
}

// batchKind names a batch's kind for the Relay's lag: an admission waits for the
// session log's mirror, other facts take a transaction, parts alone a statement.
func batchKind(ops []store.RelayOp, admits bool) string {
	if admits {
		return telemetry.RelayBatchAdmission
	}
	if len(ops) == 0 {
		return telemetry.RelayBatchFacts // a cursor alone is written as facts are
	}
	for _, op := range ops {
		if op.Part == nil {
			return telemetry.RelayBatchFacts
		}
	}
	return telemetry.RelayBatchParts
}

// deliverOnNotice hands held inputs over whenever PostgreSQL announces a new one (or
// the listener reconnected and may have missed one): the reader passes a person's
// message on over its connection without waiting for the workflow. Once it listens
// and has delivered what was held then, it records so under its lease
// (store.SetInputsOnNotice), and the API stops signalling the workflow for new
// inputs, and tells the workflow (DeliversOnNotice), which stops running its own
// Deliver for a signalled one: a turn then costs Temporal nothing for its input.
//
// The record outlives a Relay that ends: a later lease voids it (the next Relay
// delivers what is held when it begins) and a release clears it and hands the
// workflow the held inputs it was not signalled for. Only a Relay that goes on
// without listening clears it itself.
func (r *relayRun) deliverOnNotice(ctx context.Context) {
	// The Relay's first observation is sent once this says whether it listens, and
	// a listener that stops (the worker's notices closed) is told to the workflow,
	// which delivers again.
	defer r.wakeObserver()
	defer r.listening.Store(false)
	sub, err := r.a.deps.Notices.Subscribe(ctx, pubsub.SessionInputsChannel(r.l.sessionID))
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("listen for inputs; the workflow still delivers them", zap.Error(err))
		}
		return
	}
	defer sub.Close()
	// An input accepted before the subscription had no notice to wait for.
	if !r.deliverUntilDone(ctx, 0) {
		return
	}
	if err := r.a.deps.Store.SetInputsOnNotice(ctx, r.l.sessionID, r.lease); err != nil {
		// The API goes on signalling each input, and the workflow delivers it.
		r.log.Warn("record that inputs are taken on notice", zap.Error(err))
	}
	r.listening.Store(true)
	r.wakeObserver()
	for {
		notices, lost, open := nextNotices(ctx, sub)
		switch {
		case ctx.Err() != nil:
			return
		case !open:
			r.stopTakingInputsOnNotice(ctx)
			return
		case !r.handOverNotices(ctx, notices, lost):
			return
		}
	}
}

// nextNotices waits for the subscription's next notices and takes every one queued.
// lost reports that notices were discarded for a full queue (or a dropped
// connection) before this take ended: the take's own notices then do not cover
// every input, whichever of the two the wait woke on. open is false once the
// subscription closed.
func nextNotices(ctx context.Context, sub *pubsub.Subscription) (notices []pubsub.Notification, lost, open bool) {
	select {
	case <-ctx.Done():
		return nil, false, true
	case n, ok := <-sub.C():
		if !ok {
			return nil, false, false
		}
		notices = append(notices, n)
	case <-sub.Dropped():
		lost = true
	}
	for len(sub.C()) > 0 {
		notices = append(notices, <-sub.C())
	}
	// A notice discarded while the queue was full was newer than every one taken.
	select {
	case <-sub.Dropped():
		lost = true
	default:
	}
	return notices, lost, true
}

// handOverNotices hands over the inputs the notices announce, in accepted order:
// each from its notice while the notices follow on from the last input handed over
// (a person's message reaches the runtime without a read of custody), the rest with
// one read of the held inputs, as when notices were lost (lost: the read covers
// the inputs whose notices never came). It reports false as deliverUntilDone does.
func (r *relayRun) handOverNotices(ctx context.Context, notices []pubsub.Notification, lost bool) bool {
	parsed := make([]pubsub.InputNotice, 0, len(notices))
	var newest int64
	for _, n := range notices {
		in, err := pubsub.ParseInputNotice(n.Payload)
		if err != nil {
			r.log.Warn("input notice unreadable; reading the held inputs", zap.Error(err))
			continue
		}
		parsed = append(parsed, in)
		newest = max(newest, in.Seq)
	}
	if lost || len(parsed) < len(notices) || len(parsed) == 0 {
		return r.deliverUntilDone(ctx, newest)
	}
	for _, in := range parsed {
		handed, err := r.a.handOverNoticed(ctx, r.l, in)
		switch {
		case errors.Is(err, engines.ErrRuntimeConnectionLost):
			r.log.Info("deliver on notice: the runtime's connection is gone", zap.Error(err))
			return false
		case err != nil:
			r.log.Warn("hand over a noticed input; reading the held inputs", zap.String("input_id", in.ID), zap.Error(err))
			return r.deliverUntilDone(ctx, newest)
		case !handed:
			// Every noticed input committed before the read, so it covers them all.
			return r.deliverUntilDone(ctx, newest)
		}
	}
	return true
}

// stopTakingInputsOnNotice is for a Relay that goes on without its notices (the
// worker's listener closed): the API signals the workflow for every input from the
// record's removal, and what came meanwhile without a signal is handed over now.
func (r *relayRun) stopTakingInputsOnNotice(ctx context.Context) {
	if err := r.a.deps.Store.ClearInputsOnNotice(ctx, r.l.sessionID, r.lease); err != nil {
		r.log.Warn("record that inputs are no longer taken on notice", zap.Error(err))
	}
	r.deliverUntilDone(ctx, 0)
}

// deliverRetryMax bounds the pause between attempts of a hand-over that failed.
const deliverRetryMax = 5 * time.Second

// deliverUntilDone hands the held inputs over, trying again after a failure (the
// workflow leaves new inputs to this Relay) until it succeeds, ctx ends, or the
// runtime's connection is gone (the Relay is ending then, and the workflow
// delivers to the next connection). It reports whether the inputs were handed over.
// committedThrough is as deliverHeld's.
func (r *relayRun) deliverUntilDone(ctx context.Context, committedThrough int64) bool {
	pause := 100 * time.Millisecond
	for {
		_, err := r.a.deliverHeld(ctx, r.l, committedThrough)
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, engines.ErrRuntimeConnectionLost):
			r.log.Info("deliver on notice: the runtime's connection is gone", zap.Error(err))
			return false
		}
		r.log.Warn("deliver on notice; trying again", zap.Duration("pause", pause), zap.Error(err))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, deliverRetryMax)
	}
}
