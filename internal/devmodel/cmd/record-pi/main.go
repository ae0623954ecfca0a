// Command record-pi records the pinned Pi against the scripted
// model server into engines/pi/testdata/native (see package recordpi).
//
//	go run ./internal/devmodel/cmd/record-pi [-out DIR] [-work DIR] [case ...]
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
	"github.com/astrabox/astrabox/internal/devmodel/recordpi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record-pi:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output folder (default: <repo>/"+recordpi.DefaultOutDir+")")
	work := flag.String("work", filepath.Join(os.TempDir(), "astrabox-record-pi"), "folder for each case's HOME, Pi agent folder and working directory")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: record-pi [flags] [case ...]\ncases: %v\n", recordpi.CaseNames())
		flag.PrintDefaults()
	}
	flag.Parse()
	root, err := agentbin.Root()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, recordpi.DefaultOutDir)
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
	return recordpi.Record(ctx, recordpi.Options{Root: root, OutDir: *out, WorkBase: *work, Cases: flag.Args(), Logger: logger})
}
