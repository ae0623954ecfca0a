package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// runAsRunnerEnv makes this test binary the runner itself (its main), so a benchmark
// can run the runner as a process of its own.
const runAsRunnerEnv = "ASTRABOX_RUNNER_BENCH_AS_RUNNER"

func TestMain(m *testing.M) {
	if os.Getenv(runAsRunnerEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// BenchmarkRunnerCPUPerLine runs the runner as a process of its own (as an image's
// entry point, `serve -listen`), starts a program that writes a 120-byte line every
// 10 ms (a streaming reply's deltas), follows its output to the end as a Relay does,
// and reports the runner process's CPU per line from /proc: what a box's runner costs
// beside the program it serves.
func BenchmarkRunnerCPUPerLine(b *testing.B) {
	const lines = 500
	var used time.Duration
	for b.Loop() {
		used += followOneProgram(b, lines)
	}
	b.ReportMetric(float64(used.Microseconds())/float64(b.N*lines), "runner-cpu-µs/line")
}

func followOneProgram(b *testing.B, lines int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := b.TempDir()
	const token = "bench-token-0123456789"
	runner := exec.Command(os.Args[0], "serve", "-listen", addr)
	runner.Env = []string{runAsRunnerEnv + "=1", "PATH=/usr/bin:/bin", runnerapi.EnvToken + "=" + token,
		runnerapi.EnvWorkspace + "=" + dir, runnerapi.EnvStateDir + "=" + b.TempDir()}
	if err := runner.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = runner.Process.Kill()
		_ = runner.Wait()
	}()
	c := runnerapi.NewHTTPClient("http://"+addr, token, nil)
	defer c.Close()
	for {
		if _, err := c.Info(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatal("the runner did not answer")
		case <-time.After(20 * time.Millisecond):
		}
	}
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i %s"; sleep 0.01; i=$((i+1)); done`, lines, strings.Repeat("x", 110))
	before := processCPU(b, runner.Process.Pid)
	if _, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "emit", Argv: []string{"sh", "-c", script}}); err != nil {
		b.Fatal(err)
	}
	out, err := c.Output(ctx, "emit", 0, true)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	n := 0
	for {
		_, err := out.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != lines {
		b.Fatalf("followed %d of %d lines", n, lines)
	}
	return processCPU(b, runner.Process.Pid) - before
}

// processCPU is the user and system time pid has used (its own, not its children's).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and stime are the
	// 12th and 13th, in clock ticks (100 a second on Linux).
	fields := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+1:])
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("read the runner's CPU from %q", raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
