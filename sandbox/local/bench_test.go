package local

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

func benchBackend(b *testing.B, prewarm []PrewarmProfile) *Backend {
	b.Helper()
	requireBoxesB(b)
	opts := Options{RunnerPath: runnerBin, UIDFirst: 390000, UIDCount: 5000, Prewarm: prewarm}
	dir, err := os.MkdirTemp("", "abxb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts.StateDir = dir
	be, err := New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = be.Reap(ctx, func(string) bool { return false })
		_ = be.Close()
	})
	return be
}

func requireBoxesB(b *testing.B) {
	b.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil || os.Getuid() != 0 {
		b.Fatalf("box benchmarks need root and bubblewrap: uid=%d, bwrap: %v", os.Getuid(), err)
	}
}

func millis(d []time.Duration, p float64) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[int(float64(len(d)-1)*p)]) / float64(time.Millisecond)
}

// BenchmarkColdCreate measures Create: folders, account, cgroups, bubblewrap
// and the runner up and answering.
func BenchmarkColdCreate(b *testing.B) {
	be := benchBackend(b, nil)
	ctx := context.Background()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		h, err := be.Create(ctx, sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		_ = be.Destroy(ctx, h.ID())
		b.StartTimer()
	}
	b.ReportMetric(millis(took, 0.5), "p50-ms")
	b.ReportMetric(millis(took, 0.99), "p99-ms")
}

// BenchmarkPrewarmedClaim measures Claim when the pool holds a ready box. A
// refill takes a cold create, so the benchmark takes a fixed sample of claims
// instead of growing b.N; ns/op is the median claim.
func BenchmarkPrewarmedClaim(b *testing.B) {
	const samples = 15
	be := benchBackend(b, []PrewarmProfile{{Key: "bench", Size: 2}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var took []time.Duration
	for range b.N {
		for range samples {
			if err := be.Pool().WaitReady(ctx, "bench", 1); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			h, err := be.Claim(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Process(ctx, "none"); err == nil {
				b.Fatal("unexpected process")
			}
			took = append(took, time.Since(start))
			_ = be.Destroy(ctx, h.ID())
		}
	}
	b.ReportMetric(millis(took, 0.5), "p50-ms")
	b.ReportMetric(millis(took, 0.99), "p99-ms")
	b.ReportMetric(millis(took, 0.5)*float64(time.Millisecond), "ns/op")
}
