package loadbench

import (
	"context"
	"fmt"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// histogram is a Prometheus histogram of the workers as read at one moment: per
// bucket upper bound (seconds), the observations within it.
type histogram struct {
	bounds []float64
	counts []float64 // cumulative, as Prometheus keeps them
	// total counts the observations past the last bound too.
	total float64
}

// workerHistogram sums the workers' series of the histogram name whose label is value
// (every series when value is empty).
func (b *bench) workerHistogram(ctx context.Context, name, label, value string) (histogram, error) {
	var sum histogram
	for _, url := range b.workerMetrics {
		h, err := scrapeHistogram(ctx, url, name, label, value)
		if err != nil {
			return histogram{}, err
		}
		sum, err = sum.plus(h)
		if err != nil {
			return histogram{}, fmt.Errorf("scrape %s: %w", url, err)
		}
	}
	return sum, nil
}

// plus adds b's observations to a's, bucket by bucket.
func (a histogram) plus(b histogram) (histogram, error) {
	if a.bounds == nil {
		a = histogram{bounds: b.bounds, counts: make([]float64, len(b.counts))}
	}
	if len(b.counts) != len(a.counts) {
		return histogram{}, fmt.Errorf("%d buckets where another histogram has %d", len(b.counts), len(a.counts))
	}
	out := histogram{bounds: a.bounds, counts: make([]float64, len(a.counts)), total: a.total + b.total}
	for i := range a.counts {
		out.counts[i] = a.counts[i] + b.counts[i]
	}
	return out, nil
}

// since is the histogram of what was observed after before was read.
func (h histogram) since(before histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), total: h.total - before.total}
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
func (h histogram) pct(p int) time.Duration {
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
func scrapeHistogram(ctx context.Context, url, name, label, value string) (histogram, error) {
	family, err := scrapeFamily(ctx, url, name)
	if err != nil {
		return histogram{}, err
	}
	var sum histogram
	for _, metric := range family.GetMetric() {
		read := metric.GetHistogram()
		if read == nil {
			return histogram{}, fmt.Errorf("scrape %s: %s is no histogram", url, name)
		}
		if value != "" && !hasLabel(metric.GetLabel(), label, value) {
			continue
		}
		h := histogram{total: float64(read.GetSampleCount())}
		for _, bucket := range read.GetBucket() {
			if math.IsInf(bucket.GetUpperBound(), +1) {
				continue
			}
			h.bounds = append(h.bounds, bucket.GetUpperBound())
			h.counts = append(h.counts, float64(bucket.GetCumulativeCount()))
		}
		if sum, err = sum.plus(h); err != nil {
			return histogram{}, fmt.Errorf("scrape %s: %s: %w", url, name, err)
		}
	}
	if sum.bounds == nil {
		return histogram{}, fmt.Errorf("scrape %s: no %s{%s=%q}", url, name, label, value)
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
