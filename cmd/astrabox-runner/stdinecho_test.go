package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdinEchoJournalsWhatItForwards runs a program under stdin-echo: every line sent
// appears on stdout wrapped, before the program's own answer to it, and the program's
// exit code is stdin-echo's.
func TestStdinEchoJournalsWhatItForwards(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "astrabox-runner")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// The program answers each line with its length, then exits 3 at end of input.
	cmd := exec.Command(bin, "stdin-echo", "--", "/bin/sh", "-c", `while read -r l; do echo "{\"len\":${#l}}"; done; exit 3`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	read := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended: %v", lines.Err())
		}
		return lines.Text()
	}
	for _, sent := range []string{`{"id":1}`, `{"id":"two","params":{"x":[1,2]}}`} {
		if _, err := io.WriteString(stdin, sent+"\n"); err != nil {
			t.Fatal(err)
		}
		if got, want := read(), `{"`+SentKey+`":`+sent+`}`; got != want {
			t.Fatalf("journalled %q, want %q", got, want)
		}
		if got := read(); !strings.HasPrefix(got, `{"len":`) {
			t.Fatalf("the program's answer %q does not follow what it was sent", got)
		}
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 3 {
			t.Fatalf("exit: %v, want code 3", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("stdin-echo did not end after its program")
	}
}
