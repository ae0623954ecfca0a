package loadbench

import (
	"context"
	"fmt"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/astrabox/astrabox/internal/telemetry"
)

// relayLag is the workers' astrabox_relay_lag_seconds histogram: per bucket upper
// bound (seconds), the batches a Relay committed within it of reading their first
// event. Beside event-to-part it splits a part's way into the program's and its
// runner's (before the Relay read it) and the platform's (the Relay's batch and its
// group's commit).
type relayLag struct {
	bounds []float64
	counts []float64 // cumulative, as Prometheus keeps them
	// total counts the batches past the last bound too.
	total float64
}

// relayLag sums the workers' histograms of the batches of kind (a batch label of
// telemetry.MetricRelayLag; every kind when empty).
func (b *bench) relayLag(ctx context.Context, kind string) (relayLag, error) {
	var sum relayLag
	for _, url := range b.workerMetrics {
		h, err := scrapeHistogram(ctx, url, telemetry.MetricRelayLag, "batch", kind)
		if err != nil {
			return relayLag{}, err
		}
		sum, err = sum.plus(h)
		if err != nil {
			return relayLag{}, fmt.Errorf("scrape %s: %w", url, err)
		}
	}
	return sum, nil
}

// plus adds h's batches to these, bucket by bucket.
func (l relayLag) plus(h relayLag) (relayLag, error) {
	if l.bounds == nil {
		l = relayLag{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	}
	if len(h.counts) != len(l.counts) {
		return relayLag{}, fmt.Errorf("%d buckets where another histogram has %d", len(h.counts), len(l.counts))
	}
	out := relayLag{bounds: l.bounds, counts: make([]float64, len(l.counts)), total: l.total + h.total}
	for i := range l.counts {
		out.counts[i] = l.counts[i] + h.counts[i]
	}
	return out, nil
}

// since is the histogram of the batches committed after before was read.
func (h relayLag) since(before relayLag) relayLag {
	out := relayLag{bounds: h.bounds, counts: make([]float64, len(h.counts)), total: h.total - before.total}
	for i, c := range h.counts {
		if i < len(before.counts) {
			c -= before.counts[i]
		}
		out.counts[i] = c
	}
	return out
}

// pct is the p-th percentile, interpolated linearly within its bucket as
// Prometheus's histogram_quantile does (the bucket bounds make it coarse); a
// percentile past the last bound is that bound. Zero without batches.
func (h relayLag) pct(p int) time.Duration {
	if len(h.counts) == 0 || h.total == 0 {
		return 0
	}
	rank := float64(p) / 100 * h.total
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			seconds := h.bounds[i]
			if c > below {
				seconds = lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
			}
			return time.Duration(seconds * float64(time.Second))
		}
		lower, below = h.bounds[i], c
	}
	return time.Duration(h.bounds[len(h.bounds)-1] * float64(time.Second))
}

// scrapeHistogram reads a histogram of a Prometheus endpoint (its buckets up to the
// last finite bound), summing its series whose label is value (every series when
// value is empty).
func scrapeHistogram(ctx context.Context, url, name, label, value string) (relayLag, error) {
	family, err := scrapeFamily(ctx, url, name)
	if err != nil {
		return relayLag{}, err
	}
	var sum relayLag
	for _, metric := range family.GetMetric() {
		histogram := metric.GetHistogram()
		if histogram == nil {
			return relayLag{}, fmt.Errorf("scrape %s: %s is no histogram", url, name)
		}
		if value != "" && !hasLabel(metric.GetLabel(), label, value) {
			continue
		}
		h := relayLag{total: float64(histogram.GetSampleCount())}
		for _, bucket := range histogram.GetBucket() {
			if math.IsInf(bucket.GetUpperBound(), +1) {
				continue
			}
			h.bounds = append(h.bounds, bucket.GetUpperBound())
			h.counts = append(h.counts, float64(bucket.GetCumulativeCount()))
		}
		if sum, err = sum.plus(h); err != nil {
			return relayLag{}, fmt.Errorf("scrape %s: %s: %w", url, name, err)
		}
	}
	if sum.bounds == nil {
		return relayLag{}, fmt.Errorf("scrape %s: no %s{%s=%q}", url, name, label, value)
	}
	return sum, nil
}

// hasLabel reports whether labels hold name=value.
func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
