package activities

import (
	"testing"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store/pubsub"
)

// BenchmarkNoticedBurstHandOver times a burst of four inputs taken on notice, from
// the first notice until the runtime has the fourth input (its delivery records
// are written outside the timed part): what a person's parallel messages wait
// before the program holds them.
func BenchmarkNoticedBurstHandOver(b *testing.B) {
	ctx := testutil.Context(b)
	f := newHandOverFixture(ctx, b)
	a, l := f.a, f.l
	a.log = zap.NewNop()
	if _, err := a.deliverHeld(ctx, l, 0); err != nil {
		b.Fatal(err)
	}
	const burst = 4
	notices := make([]pubsub.InputNotice, burst)
	for b.Loop() {
		b.StopTimer()
		for i := range notices {
			notices[i] = f.accept(ctx, b, "m")
		}
		b.StartTimer()
		for _, n := range notices {
			if handed, err := a.handOverNoticed(ctx, l, n); err != nil || !handed {
				b.Fatalf("hand over %d: %v %v", n.Seq, handed, err)
			}
		}
		b.StopTimer()
		if err := a.awaitDeliveryWriter(ctx, l); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
