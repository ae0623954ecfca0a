package activities

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// deliveryRecords holds a runtime's hand-overs whose custody record (delivered, to
// this runtime's generation) is still to be written. An input taken on notice is
// recorded after its Submit by a writer of its own, several inputs in one
// statement, so an input sent right behind another reaches the runtime without
// waiting for the first one's record on a busy PostgreSQL. The record only names
// the runtime that has the input: until it is written the input is pending, which
// custody treats the same (a read hands it over again, the runtime takes an input
// id once, and admission moves a pending input as it does a delivered one).
type deliveryRecords struct {
	mu  sync.Mutex
	ids []string
	// writing is closed once the running writer found nothing left to write; nil
	// while none runs.
	writing chan struct{}
}

// add keeps an input handed over for the next write. The caller holds deliverMu.
func (d *deliveryRecords) add(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, id)
}

// take returns the inputs to write and forgets them; finding none, a running writer
// ends (none runs while a hand-over that reads takes them).
func (d *deliveryRecords) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := d.ids
	d.ids = nil
	if len(ids) == 0 {
		d.writing = nil
	}
	return ids
}

// writeDeliveriesSoon starts a writer for the runtime's unwritten records unless one
// runs; a running writer takes what was added meanwhile before it ends. A record
// that fails to write leaves its inputs pending and makes the next hand-over read
// the held inputs, which hands them over again and records them. The caller holds
// deliverMu, so a hand-over that reads waits for this writer first.
func (a *Activities) writeDeliveriesSoon(ctx context.Context, l *liveRuntime) {
	d := &l.records
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.writing != nil || len(d.ids) == 0 {
		return
	}
	done := make(chan struct{})
	d.writing = done
	go func() {
		defer close(done)
		for ids := d.take(); len(ids) > 0; ids = d.take() {
			if err := a.writeDeliveries(ctx, l, ids); err != nil {
				l.tookBack.Store(true)
				a.log.Warn("record inputs delivered; the next hand-over reads them", zap.String("session_id", l.sessionID), zap.Error(err))
			}
		}
	}()
}

// awaitDeliveryWriter waits for the runtime's running writer, if any, to end: the
// held inputs read after it list none that this runtime already has. The caller
// holds deliverMu, so no writer starts meanwhile.
func (a *Activities) awaitDeliveryWriter(ctx context.Context, l *liveRuntime) error {
	l.records.mu.Lock()
	writing := l.records.writing
	l.records.mu.Unlock()
	if writing == nil {
		return nil
	}
	select {
	case <-writing:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeDeliveries records the inputs delivered to the runtime, in one statement.
func (a *Activities) writeDeliveries(ctx context.Context, l *liveRuntime, ids []string) error {
	_, err := a.deps.Store.MarkInputsDeliveredTo(ctx, l.sessionID, ids, l.generation)
	return err
}
