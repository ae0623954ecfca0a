package activities_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// BenchmarkConcurrentSessions runs many Sessions at once through the real stack (one
// worker process, Temporal dev server, PostgreSQL, one local box per Session with the
// scripted engine) and reports:
//
//   - input_to_runtime_p50/p99_ms: accepted_at to delivered_at of each input;
//   - event_to_part_p50/p99_ms: the program writing a text delta to the part's row
//     (created_at, the committing transaction's start);
//   - parts/s: parts committed per second over the streaming phase;
//   - idle_session_KiB: worker heap per idle Session (live connection, Relay).
//
// ASTRABOX_BENCH_SESSIONS sets the number of Sessions (default 100); run it with
// -benchtime=1x. Each Session first answers a warm-up input (its box starts: the
// cold_start figure), then one input with 50 deltas ASTRABOX_BENCH_GAP_MS apart
// (default 10), which is measured: n*50/gap parts per second are offered at once.
func BenchmarkConcurrentSessions(b *testing.B) {
	n := 100
	if v := os.Getenv("ASTRABOX_BENCH_SESSIONS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	gapMS := 10
	if v := os.Getenv("ASTRABOX_BENCH_GAP_MS"); v != "" {
		var err error
		gapMS, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	for range b.N {
		runConcurrentSessions(b, n, gapMS)
	}
}

func runConcurrentSessions(b *testing.B, n, gapMS int) {
	s := newStack(b)
	s.startWorker("bench-" + uniq())
	const deltasPer = 50

	heapBefore := heapInUse()
	ids := make([]string, n)
	inputs := make([]string, n)
	for i := range ids {
		ids[i] = s.newSession()
	}
	// Warm-up: the first input of each Session starts its box (cold start).
	var cold []float64
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { inputs[i] = s.send(ids[i], "quick") })
	}
	wg.Wait()
	for i := range ids {
		s.waitEnded(ids[i], "resp-"+inputs[i])
		in, err := s.st.GetInputByID(s.ctx, inputs[i])
		require.NoError(b, err)
		cold = append(cold, ms(reached(in).Sub(in.AcceptedAt)))
	}
	warmParts := 0
	for _, id := range ids {
		warmParts += len(s.parts(id))
	}
	start := time.Now()
	for i := range ids {
		wg.Go(func() { inputs[i] = s.send(ids[i], fmt.Sprintf("slow:%d:%d", deltasPer, gapMS)) })
	}
	wg.Wait()
	for i := range ids {
		s.waitEnded(ids[i], "resp-"+inputs[i])
	}
	elapsed := time.Since(start)

	// Every Session now holds an idle live runtime and Relay.
	s.eventually("every session idle", func() bool {
		for _, id := range ids {
			f, err := s.st.GetSessionFactsByID(s.ctx, id)
			require.NoError(b, err)
			if f.State() != store.StateReady {
				return false
			}
		}
		return true
	})
	heapIdle := heapInUse()

	var toRuntime, toPart []float64
	total := -warmParts
	for i, id := range ids {
		in, err := s.st.GetInputByID(s.ctx, inputs[i])
		require.NoError(b, err)
		toRuntime = append(toRuntime, ms(reached(in).Sub(in.AcceptedAt)))
		for _, p := range s.parts(id) {
			total++
			var f struct {
				Type string `json:"type"`
				PM   struct {
					S struct {
						At int64 `json:"at_us"`
					} `json:"scriptagent"`
				} `json:"providerMetadata"`
			}
			require.NoError(b, json.Unmarshal(p.Frame, &f))
			if f.Type == "text-delta" && f.PM.S.At > 0 && p.ResponseID != nil && *p.ResponseID == "resp-"+inputs[i] {
				toPart = append(toPart, ms(p.CreatedAt.Sub(time.UnixMicro(f.PM.S.At))))
			}
		}
	}
	require.Len(b, toPart, n*deltasPer)
	b.ReportMetric(pct(cold, 50), "cold_start_p50_ms")
	b.ReportMetric(pct(toRuntime, 50), "input_to_runtime_p50_ms")
	b.ReportMetric(pct(toRuntime, 99), "input_to_runtime_p99_ms")
	b.ReportMetric(pct(toPart, 50), "event_to_part_p50_ms")
	b.ReportMetric(pct(toPart, 99), "event_to_part_p99_ms")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "parts/s")
	b.ReportMetric((float64(heapIdle)-float64(heapBefore))/float64(n)/1024, "idle_session_KiB")
	b.Logf("cold start (box + runtime) p50 %.0f ms p99 %.0f ms", pct(cold, 50), pct(cold, 99))
	b.Logf("%d sessions: %d parts in %s; input->runtime p50 %.1f ms p99 %.1f ms; event->part p50 %.1f ms p99 %.1f ms; %.0f parts/s; %.0f KiB heap per idle session",
		n, total, elapsed.Round(time.Millisecond), pct(toRuntime, 50), pct(toRuntime, 99), pct(toPart, 50), pct(toPart, 99),
		float64(total)/elapsed.Seconds(), (float64(heapIdle)-float64(heapBefore))/float64(n)/1024)
}

// reached is when the input reached the runtime: its delivery receipt, or its
// admission when the Relay recorded that before Deliver recorded the receipt.
func reached(in store.Input) time.Time {
	switch {
	case in.DeliveredAt != nil && (in.AdmittedAt == nil || in.DeliveredAt.Before(*in.AdmittedAt)):
		return *in.DeliveredAt
	case in.AdmittedAt != nil:
		return *in.AdmittedAt
	}
	return in.AcceptedAt
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
