// Command record-codex records the pinned Codex CLI against the scripted
// model server into engines/claude/testdata/native (see package recordcodex).
//
//	go run ./internal/devmodel/cmd/record-codex [-out DIR] [-work DIR] [case ...]
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
	"github.com/astrabox/astrabox/internal/devmodel/recordcodex"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record-codex:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output folder (default: <repo>/"+recordcodex.DefaultOutDir+")")
	work := flag.String("work", filepath.Join(os.TempDir(), "astrabox-record-codex"), "folder for each case's HOME, CODEX_HOME, TMPDIR and working directory")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: record-codex [flags] [case ...]\ncases: %v\n", recordcodex.CaseNames())
		flag.PrintDefaults()
	}
	flag.Parse()
	root, err := agentbin.Root()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, recordcodex.DefaultOutDir)
	}
	logCfg := zap.NewDevelopmentConfig()
	// Model request bodies (debug) are tens of kilobytes each.
	logCfg.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
	logger, err := logCfg.Build()
	if err != nil {
		return fmt.Errorf("create logger: %w", err)
	}
	defer func() { _ = logger.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return recordcodex.Record(ctx, recordcodex.Options{Root: root, OutDir: *out, WorkBase: *work, Cases: flag.Args(), Logger: logger})
}
