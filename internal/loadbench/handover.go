package loadbench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/astrabox/astrabox/internal/telemetry"
)

// handOvers are, for each measured input of a phase's Sessions (every input but the
// first, which started the box), the times from its acceptance (its row's
// accepted_at), on the database's clock:
type handOvers struct {
	// toRuntime: to its row's delivered_at, once the Relay handed it to the runtime
	// and recorded that (the input notice, the read of the held inputs and the
	// runtime client's Submit); an input the runtime admitted before the delivery
	// was recorded has none.
	toRuntime samples
	// toFirstPart: to the first part of the response answering it committed (that
	// part's created_at): the hand-over, the program's own time to first output and
	// the recording of that output. The time to first part is this beside the
	// receipt before it and the delivery to the stream after it.
	toFirstPart samples
	// sources: how the workers handed the measured inputs over.
	sources handOverSources
}

// handOvers reads the hand-overs of the measured inputs of sessions, and how the
// workers handed them over since sourcesBefore (read before the measured turns).
func (b *bench) handOvers(ctx context.Context, sessions []*session, sourcesBefore handOverSources) (handOvers, error) {
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return handOvers{}, fmt.Errorf("read hand-overs: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.id
	}
	rows, err := conn.Query(ctx, `SELECT EXTRACT(EPOCH FROM i.delivered_at - i.accepted_at)::float8,
			EXTRACT(EPOCH FROM min(p.created_at) - i.accepted_at)::float8
		FROM inputs i
		JOIN responses r ON r.session_id = i.session_id AND r.input_ids ? i.id::text
		JOIN output_parts p ON p.session_id = r.session_id AND p.response_id = r.response_id
		WHERE i.session_id = ANY($1::uuid[]) AND i.client_message_id <> $2
		GROUP BY i.id, i.accepted_at, i.delivered_at`, ids, warmClientID)
	if err != nil {
		return handOvers{}, fmt.Errorf("read hand-overs: %w", err)
	}
	var out handOvers
	var toRuntime *float64
	var toFirstPart float64
	if _, err := pgx.ForEachRow(rows, []any{&toRuntime, &toFirstPart}, func() error {
		if toRuntime != nil {
			out.toRuntime = append(out.toRuntime, seconds(*toRuntime))
		}
		out.toFirstPart = append(out.toFirstPart, seconds(toFirstPart))
		return nil
	}); err != nil {
		return handOvers{}, fmt.Errorf("read hand-overs: %w", err)
	}
	if want := len(sessions) * b.opts.Turns; len(out.toFirstPart) != want {
		return handOvers{}, fmt.Errorf("read hand-overs: %d of the %d measured inputs have a response with parts", len(out.toFirstPart), want)
	}
	sources, err := b.handOverSources(ctx)
	if err != nil {
		return handOvers{}, err
	}
	out.sources = sources.since(sourcesBefore)
	return out, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// rows reports the hand-overs.
func (h handOvers) rows(tag string) []Row {
	return []Row{
		{Figure: "accepted to delivered " + tag, Goal: "report", P50: msString(h.toRuntime.pct(50)), P99: msString(h.toRuntime.pct(99))},
		{Figure: "accepted to first part committed " + tag, Goal: "report", P50: msString(h.toFirstPart.pct(50)), P99: msString(h.toFirstPart.pct(99))},
		{Figure: "inputs handed over from their notice " + tag, Goal: "report", P50: fmt.Sprintf("%d of %d", h.sources.notice, h.sources.notice+h.sources.read)},
	}
}

// handOverSources counts the inputs the workers handed to runtimes, by how: from the
// content their notification carried, or from a read of the held inputs.
type handOverSources struct {
	notice, read int
}

// handOverSources reads the workers' astrabox_inputs_handed_over_total.
func (b *bench) handOverSources(ctx context.Context) (handOverSources, error) {
	var total handOverSources
	for _, url := range b.workerMetrics {
		counts, err := scrapeCounter(ctx, url, telemetry.MetricInputsHandedOver, "source")
		if err != nil {
			return handOverSources{}, err
		}
		total.notice += counts["notice"]
		total.read += counts["read"]
	}
	return total, nil
}

func (h handOverSources) since(before handOverSources) handOverSources {
	return handOverSources{notice: h.notice - before.notice, read: h.read - before.read}
}

// scrapeCounter reads a counter of a Prometheus endpoint, by the value of one label.
func scrapeCounter(ctx context.Context, url, name, label string) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	family, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("scrape %s: no %s", url, name)
	}
	out := map[string]int{}
	for _, m := range family.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += int(m.GetCounter().GetValue())
			}
		}
	}
	return out, nil
}
