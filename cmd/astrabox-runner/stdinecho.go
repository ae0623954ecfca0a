package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// SentKey is the member that wraps a line `stdin-echo` forwarded to its program,
// so the line appears in the program's stdout journal before anything the program
// answers to it: {"astrabox_sent": <the line>}.
const SentKey = "astrabox_sent"

// stdinEcho runs argv with its stdin and stdout relayed line by line: every line
// read on stdin is first written to stdout wrapped as {"astrabox_sent": <line>},
// then to the program. Both go through one lock, whole lines at a time, so the
// journal of stdout holds what the program was sent in the order it was sent,
// and never a line of the program's cut by one of ours. Lines written to stdin must
// be JSON values. Stderr is the program's own. The program dies with this process.
func stdinEcho(argv []string) error {
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return errors.New("usage: astrabox-runner stdin-echo -- PROGRAM [ARGS...]")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	toProgram, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	fromProgram, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()

	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	writeLine := func(parts ...[]byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range parts {
			_, _ = out.Write(p)
		}
		_ = out.WriteByte('\n')
		_ = out.Flush()
	}
	var relayed sync.WaitGroup
	relayed.Add(1)
	go func() {
		defer relayed.Done()
		r := bufio.NewReaderSize(fromProgram, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				writeLine(trimNewline(line))
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if line = trimNewline(line); len(line) > 0 {
				writeLine([]byte(`{"`+SentKey+`":`), line, []byte("}"))
				if _, werr := toProgram.Write(append(line, '\n')); werr != nil {
					return
				}
			}
			if err != nil {
				_ = toProgram.Close()
				return
			}
		}
	}()
	relayed.Wait()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			os.Exit(128 + int(status.Signal()))
		}
		os.Exit(exit.ExitCode())
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
