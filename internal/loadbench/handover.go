package loadbench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// acceptedToFirstPart is, for each measured input of the Sessions (every input but
// the first, which started the box), the time from its acceptance (its row's
// accepted_at) to the first part of the response answering it committed (that part's
// created_at), both on the database's clock: the hand-over to the runtime, the
// program's own time to first output, and the recording of that output. The time to
// first part is this beside the receipt before it and the delivery to the stream
// after it.
func (b *bench) acceptedToFirstPart(ctx context.Context, sessions []*session) (samples, error) {
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return nil, fmt.Errorf("read hand-overs: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.id
	}
	rows, err := conn.Query(ctx, `SELECT EXTRACT(EPOCH FROM min(p.created_at) - i.accepted_at)::float8
		FROM inputs i
		JOIN responses r ON r.session_id = i.session_id AND r.input_ids ? i.id::text
		JOIN output_parts p ON p.session_id = r.session_id AND p.response_id = r.response_id
		WHERE i.session_id = ANY($1::uuid[]) AND i.client_message_id <> $2
		GROUP BY i.id, i.accepted_at`, ids, warmClientID)
	if err != nil {
		return nil, fmt.Errorf("read hand-overs: %w", err)
	}
	var out samples
	var secs float64
	if _, err := pgx.ForEachRow(rows, []any{&secs}, func() error {
		out = append(out, time.Duration(secs*float64(time.Second)))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read hand-overs: %w", err)
	}
	if want := len(sessions) * b.opts.Turns; len(out) != want {
		return nil, fmt.Errorf("read hand-overs: %d of the %d measured inputs have a response with parts", len(out), want)
	}
	return out, nil
}

// handOverRow reports acceptedToFirstPart's samples.
func handOverRow(tag string, handOver samples) Row {
	return Row{Figure: "accepted to first part committed " + tag, Goal: "report", P50: msString(handOver.pct(50)), P99: msString(handOver.pct(99))}
}
