package loadbench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
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
	// toFirstPart: to the commit of the first part of the response answering it
	// (its transaction's commit timestamp): the hand-over, the program's own time
	// to first output and the recording of that output. The time to first part is
	// this beside the receipt before it and the delivery to the stream after it.
	toFirstPart samples
	// sources: how the workers handed the measured inputs over.
	sources handOverSources
}

// handOvers reads the hand-overs of the measured inputs of sessions, and how the
// workers handed them over since sourcesBefore (read before the measured turns).
func (b *bench) handOvers(ctx context.Context, sessions []*session, sourcesBefore handOverSources) (handOvers, error) {
	var out handOvers
	var err error
	out.toRuntime, out.toFirstPart, err = b.inputTimes(ctx, "read hand-overs", sessions, `SELECT EXTRACT(EPOCH FROM i.delivered_at - i.accepted_at)::float8,
			EXTRACT(EPOCH FROM min(pg_xact_commit_timestamp(p.xmin)) - i.accepted_at)::float8
		FROM inputs i
		JOIN responses r ON r.session_id = i.session_id AND r.input_ids ? i.id::text
		JOIN output_parts p ON p.session_id = r.session_id AND p.response_id = r.response_id
		WHERE i.session_id = ANY($1::uuid[]) AND i.client_message_id <> $2
		GROUP BY i.id, i.accepted_at, i.delivered_at`, warmClientID)
	if err != nil {
		return handOvers{}, err
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

// inputTimes runs query over the inputs of sessions ($1: their ids, $2: arg) on the
// stack's database. Each row is an input's seconds from its acceptance to its
// delivered_at (NULL while unrecorded) and to a later moment; it returns both, the
// first without its NULLs. what prefixes its errors.
func (b *bench) inputTimes(ctx context.Context, what string, sessions []*session, query string, arg any) (toRuntime, toLater samples, err error) {
	conn, err := pgx.Connect(ctx, b.stack.DSN())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, query, sessionIDs(sessions), arg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	var delivered *float64
	var later float64
	if _, err := pgx.ForEachRow(rows, []any{&delivered, &later}, func() error {
		if delivered != nil {
			toRuntime = append(toRuntime, seconds(*delivered))
		}
		toLater = append(toLater, seconds(later))
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return toRuntime, toLater, nil
}

// sessionIDs are the Sessions' ids, in order.
func sessionIDs(sessions []*session) []string {
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.id
	}
	return ids
}

// rows reports the hand-overs.
func (h handOvers) rows(tag string) []Row {
	return []Row{
		{Figure: "accepted to delivered " + tag, Goal: "report", P50: pctString(h.toRuntime, 50), P99: pctString(h.toRuntime, 99)},
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
	family, err := scrapeFamily(ctx, url, name)
	if err != nil {
		return nil, err
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

// scrapeFamily reads one metric family of a Prometheus endpoint.
func scrapeFamily(ctx context.Context, url, name string) (*dto.MetricFamily, error) {
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
	return family, nil
}
