// Command record-claude records the pinned Claude Code against the scripted
// model server into engines/claude/testdata/native (see package recordclaude).
//
//	go run ./internal/devmodel/cmd/record-claude [-out DIR] [-work DIR] [case ...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel/recordclaude"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record-claude:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output folder (default: <repo>/"+recordclaude.DefaultOutDir+")")
	work := flag.String("work", filepath.Join(os.TempDir(), "astrabox-record-claude"), "folder for each case's home, config and working directory")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: record-claude [flags] [case ...]\ncases: %v\n", recordclaude.CaseNames())
		flag.PrintDefaults()
	}
	flag.Parse()
	root, err := agentbin.Root()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, recordclaude.DefaultOutDir)
	}
	logger, err := zap.NewDevelopment()
	if err != nil {
		return fmt.Errorf("create logger: %w", err)
	}
	defer func() { _ = logger.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return recordclaude.Record(ctx, recordclaude.Options{Root: root, OutDir: *out, WorkBase: *work, Cases: flag.Args(), Logger: logger})
}
