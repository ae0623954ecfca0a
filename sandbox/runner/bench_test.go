package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// emitEnv turns the test binary into a program that prints lines: "N GAP_US"
// prints N lines, each starting with its wall-clock time in ns, GAP_US apart
// (0: as fast as possible), padded to about 200 bytes like a stream-json line.
const emitEnv = "ASTRABOX_RUNNER_BENCH_EMIT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(emitEnv); spec != "" {
		emit(spec)
		return
	}
	os.Exit(m.Run())
}

func emit(spec string) {
	var n, gapUS int
	_, _ = fmt.Sscanf(spec, "%d %d", &n, &gapUS)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	pad := strings.Repeat("x", 180)
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "%d %s\n", time.Now().UnixNano(), pad)
		if gapUS > 0 {
			_ = w.Flush()
			// Pacing only: each line carries its own send time, so the sleep's
			// jitter does not enter the measured latency.
			time.Sleep(time.Duration(gapUS) * time.Microsecond)
		}
	}
	_ = w.Flush()
}

// emitter is the argv of the test binary in emitter mode.
func emitter() []string { return []string{os.Args[0], "-test.run=^$"} }

func emitterEnv(n, gapUS int) map[string]string {
	return map[string]string{emitEnv: fmt.Sprintf("%d %d", n, gapUS)}
}

// readDirect runs the emitter with a plain pipe and calls got for every line.
func readDirect(b *testing.B, n, gapUS int, got func(line []byte)) {
	argv := emitter()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), emitEnv+"="+fmt.Sprintf("%d %d", n, gapUS))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		got(line)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}

// readRelayed runs the emitter under the runner and follows its output.
func readRelayed(b *testing.B, n, gapUS int, got func(line []byte)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, c := startRunner(b, b.TempDir())
	id := fmt.Sprintf("emit-%d", time.Now().UnixNano())
	if _, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: id, Argv: emitter(), Env: emitterEnv(n, gapUS)}); err != nil {
		b.Fatal(err)
	}
	s, err := c.Output(ctx, id, 0, true)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for {
		l, err := s.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		got(l.Data)
	}
}

func latencyOf(line []byte) time.Duration {
	sent, err := strconv.ParseInt(string(line[:strings.IndexByte(string(line), ' ')]), 10, 64)
	if err != nil {
		return 0
	}
	return time.Since(time.Unix(0, sent))
}

func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[int(float64(len(d)-1)*p)]) / float64(time.Millisecond)
}

// BenchmarkRelayLatency measures, in the same run, how long a line takes from
// the program's write to the reader: straight from the program's pipe, and
// through the runner (journal on disk, then the HTTP follow stream). Lines are
// 200 bytes, 500µs apart, in alternating rounds; the figures are per line, in
// milliseconds.
func BenchmarkRelayLatency(b *testing.B) {
	const rounds, perRound, gapUS = 4, 500, 500
	const lines = rounds * perRound
	var direct, relayed []time.Duration
	// Alternate the two paths so that load from other work on the machine
	// falls on both alike.
	for range rounds {
		readDirect(b, perRound, gapUS, func(l []byte) { direct = append(direct, latencyOf(l)) })
		readRelayed(b, perRound, gapUS, func(l []byte) { relayed = append(relayed, latencyOf(l)) })
	}
	if len(direct) != lines || len(relayed) != lines {
		b.Fatalf("got %d direct and %d relayed lines, want %d", len(direct), len(relayed), lines)
	}
	dp50, dp99 := percentile(direct, 0.50), percentile(direct, 0.99)
	rp50, rp99 := percentile(relayed, 0.50), percentile(relayed, 0.99)
	b.ReportMetric(dp50, "direct-p50-ms")
	b.ReportMetric(dp99, "direct-p99-ms")
	b.ReportMetric(rp50, "relay-p50-ms")
	b.ReportMetric(rp99, "relay-p99-ms")
	b.ReportMetric(rp50-dp50, "overhead-p50-ms")
	b.ReportMetric(rp99-dp99, "overhead-p99-ms")
	b.ReportMetric(rp50*float64(time.Millisecond), "ns/op")
}

// BenchmarkRelayThroughput reads b.N lines of 200 bytes written as fast as the
// program can, straight from the pipe and through the runner.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, mode := range []struct {
		name string
		read func(*testing.B, int, int, func([]byte))
	}{{"direct", readDirect}, {"runner", readRelayed}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(200)
			count := 0
			b.ResetTimer()
			mode.read(b, b.N, 0, func([]byte) { count++ })
			b.StopTimer()
			if count != b.N {
				b.Fatalf("read %d of %d lines", count, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// BenchmarkLookAtALongLog reads the tail a 16 MiB native log gained (one 2 KiB turn),
// the way an admission poll or a mirror looks at it: the whole file, as every look
// did, or from the offset the last look stopped at.
func BenchmarkLookAtALongLog(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	_, c := startRunner(b, dir)
	path := dir + "/log.jsonl"
	const logSize, turn = 16 << 20, 2 << 10
	if err := os.WriteFile(path, []byte(strings.Repeat("x", logSize-turn)+strings.Repeat("y", turn)), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(turn)
		for b.Loop() {
			data, err := c.ReadFile(ctx, path)
			if err != nil || len(data) != logSize {
				b.Fatal(len(data), err)
			}
		}
	})
	b.Run("from-offset", func(b *testing.B) {
		b.SetBytes(turn)
		for b.Loop() {
			data, _, err := c.ReadFileFrom(ctx, path, logSize-turn)
			if err != nil || len(data) != turn {
				b.Fatal(len(data), err)
			}
		}
	})
}
