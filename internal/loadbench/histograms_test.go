package loadbench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRelayLagPercentilesInterpolateWithinTheirBucket: the measured turns' batches
// are the difference of two readings, and a percentile falls linearly within its
// bucket, as Prometheus's histogram_quantile places it.
func TestRelayLagPercentilesInterpolateWithinTheirBucket(t *testing.T) {
	before := histogram{bounds: []float64{0.01, 0.1, 1}, counts: []float64{10, 10, 10}, total: 10}
	after := histogram{bounds: []float64{0.01, 0.1, 1}, counts: []float64{60, 110, 110}, total: 110}
	lag := after.since(before)
	assert.Equal(t, []float64{50, 100, 100}, lag.counts)
	assert.Equal(t, 100.0, lag.total)
	assert.Equal(t, 5*time.Millisecond, lag.pct(25), "half way through the first bucket")
	assert.Equal(t, 10*time.Millisecond, lag.pct(50))
	assert.InDelta(t, float64(98200*time.Microsecond), float64(lag.pct(99)), float64(10*time.Microsecond), "49 of the second bucket's 50")
	assert.Zero(t, histogram{}.pct(99), "no batches")
	past := histogram{bounds: []float64{0.01}, counts: []float64{0}, total: 4}
	assert.Equal(t, 10*time.Millisecond, past.pct(50), "batches past the last bound read as it")
}

// TestRelayLagSumsTheWorkersHistograms: two workers' readings add bucket by bucket,
// and histograms of different buckets do not add.
func TestRelayLagSumsTheWorkersHistograms(t *testing.T) {
	a := histogram{bounds: []float64{0.01, 0.1}, counts: []float64{1, 2}, total: 3}
	b := histogram{bounds: []float64{0.01, 0.1}, counts: []float64{4, 4}, total: 5}
	sum, err := histogram{}.plus(a)
	require.NoError(t, err)
	sum, err = sum.plus(b)
	require.NoError(t, err)
	assert.Equal(t, histogram{bounds: []float64{0.01, 0.1}, counts: []float64{5, 6}, total: 8}, sum)
	_, err = sum.plus(histogram{bounds: []float64{1}, counts: []float64{1}, total: 1})
	assert.Error(t, err)
}
