package loadbench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// burstSize is how many inputs each Session sends at once in a phase's burst.
const burstSize = 4

// burstClientPrefix begins the client message ids of a burst's inputs.
const burstClientPrefix = "burst-"

// burst sends burstSize inputs to every Session at once, in parallel as a person's
// messages sent in quick succession, waits until every Session is READY again, and
// returns, for each of the burst's inputs, the time from its acceptance to its
// admission (the program holds it durably), on the database's clock. The program
// admits an input as it receives it, busy or not, so the figure is the hand-over's
// and the admission's record, not the turns before it.
func (b *bench) burst(ctx context.Context, sessions []*session) (samples, error) {
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
		return nil, fmt.Errorf("send a burst: %w", err)
	}
	if err := b.waitIdle(ctx, sessions); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return nil, fmt.Errorf("read a burst's admissions: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.id
	}
	rows, err := conn.Query(ctx, `SELECT EXTRACT(EPOCH FROM admitted_at - accepted_at)::float8 FROM inputs
		WHERE session_id = ANY($1::uuid[]) AND starts_with(client_message_id, $2) AND admitted_at IS NOT NULL`, ids, burstClientPrefix)
	if err != nil {
		return nil, fmt.Errorf("read a burst's admissions: %w", err)
	}
	var out samples
	var admitted float64
	if _, err := pgx.ForEachRow(rows, []any{&admitted}, func() error {
		out = append(out, seconds(admitted))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read a burst's admissions: %w", err)
	}
	if want := len(sessions) * burstSize; len(out) != want {
		return nil, fmt.Errorf("read a burst's admissions: %d of the %d inputs admitted", len(out), want)
	}
	return out, nil
}
