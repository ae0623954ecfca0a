package loadbench

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/sync/errgroup"
)

// burstSize is how many inputs each Session sends at once in a phase's burst.
const burstSize = 4

// burstClientPrefix begins the client message ids of a burst's inputs.
const burstClientPrefix = "burst-"

// burstFigures are, for each of a burst's inputs, the times from its acceptance, on
// the database's clock:
type burstFigures struct {
	// toRuntime: to its delivered_at, the record written once the runtime had it; an
	// input the runtime admitted before that record was written has none.
	toRuntime samples
	// toAdmitted: to its admitted_at, the Relay's record of the program's admission
	// (written once the session log's mirror covers the program's native log).
	toAdmitted samples
}

// rows reports the burst.
func (f burstFigures) rows(tag string) []Row {
	return []Row{
		{Figure: fmt.Sprintf("burst of %d: accepted to delivered %s", burstSize, tag), Goal: "report", P50: pctString(f.toRuntime, 50), P99: pctString(f.toRuntime, 99)},
		{Figure: fmt.Sprintf("burst of %d: accepted to admitted %s", burstSize, tag), Goal: "report", P50: msString(f.toAdmitted.pct(50)), P99: msString(f.toAdmitted.pct(99))},
	}
}

// burst sends burstSize inputs to every Session at once, in parallel as a person's
// messages sent in quick succession, waits until every Session is READY again, and
// reads the burst's figures. The program admits an input as it receives it, busy or
// not, so they are the hand-over's and the admission's record, not the turns before.
func (b *bench) burst(ctx context.Context, sessions []*session) (burstFigures, error) {
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range sessions {
		for i := range burstSize {
			g.Go(func() error {
				body := map[string]string{"content": scriptedWarm, "client_message_id": fmt.Sprintf("%s%d", burstClientPrefix, i)}
				return s.api.call(gctx, http.MethodPost, "/sessions/"+s.id+"/inputs", body, nil)
			})
		}
	}
	if err := g.Wait(); err != nil {
		return burstFigures{}, fmt.Errorf("send a burst: %w", err)
	}
	if err := b.waitIdle(ctx, sessions); err != nil {
		return burstFigures{}, err
	}
	var out burstFigures
	var err error
	out.toRuntime, out.toAdmitted, err = b.inputTimes(ctx, "read a burst's admissions", sessions, `SELECT EXTRACT(EPOCH FROM delivered_at - accepted_at)::float8,
			EXTRACT(EPOCH FROM admitted_at - accepted_at)::float8
		FROM inputs
		WHERE session_id = ANY($1::uuid[]) AND starts_with(client_message_id, $2) AND admitted_at IS NOT NULL`, burstClientPrefix)
	if err != nil {
		return burstFigures{}, err
	}
	if want := len(sessions) * burstSize; len(out.toAdmitted) != want {
		return burstFigures{}, fmt.Errorf("read a burst's admissions: %d of the %d inputs admitted", len(out.toAdmitted), want)
	}
	return out, nil
}
