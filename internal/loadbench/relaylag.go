package loadbench

import (
	"context"
	"fmt"
	"math"
	"time"

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

// relayLag sums the workers' histograms.
func (b *bench) relayLag(ctx context.Context) (relayLag, error) {
	var sum relayLag
	for _, url := range b.workerMetrics {
		h, err := scrapeHistogram(ctx, url, telemetry.MetricRelayLag)
		if err != nil {
			return relayLag{}, err
		}
		if sum.bounds == nil {
			sum = relayLag{bounds: h.bounds, counts: make([]float64, len(h.counts))}
		}
		if len(h.counts) != len(sum.counts) {
			return relayLag{}, fmt.Errorf("scrape %s: %d buckets where another worker has %d", url, len(h.counts), len(sum.counts))
		}
		for i, c := range h.counts {
			sum.counts[i] += c
		}
		sum.total += h.total
	}
	return sum, nil
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
// last finite bound).
func scrapeHistogram(ctx context.Context, url, name string) (relayLag, error) {
	family, err := scrapeFamily(ctx, url, name)
	if err != nil {
		return relayLag{}, err
	}
	if len(family.GetMetric()) == 0 || family.GetMetric()[0].GetHistogram() == nil {
		return relayLag{}, fmt.Errorf("scrape %s: %s is no histogram", url, name)
	}
	histogram := family.GetMetric()[0].GetHistogram()
	h := relayLag{total: float64(histogram.GetSampleCount())}
	for _, bucket := range histogram.GetBucket() {
		if math.IsInf(bucket.GetUpperBound(), +1) {
			continue
		}
		h.bounds = append(h.bounds, bucket.GetUpperBound())
		h.counts = append(h.counts, float64(bucket.GetCumulativeCount()))
	}
	return h, nil
}
