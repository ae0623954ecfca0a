// Package recordcodex records the pinned Codex CLI, run as `codex app-server`
// against the scripted model server, through a fixed set of scenarios (plain
// text, reasoning, a command, a file change, approvals accepted and declined,
// interrupts, a message sent while a turn runs, a model error). Each recording
// keeps the exact stdin lines sent, the stdout and stderr lines received, a
// summary of the model requests, and the rollout JSONL Codex wrote: the raw
// material the engines/codex translation is tested on.
package recordcodex

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// DefaultOutDir is where recordings go, relative to the repository root.
const DefaultOutDir = "engines/codex/testdata/native"

// Options configure Record.
type Options struct {
	// Root is the repository root (agentbin.Root).
	Root string
	// OutDir receives <case>.jsonl, <case>.rollout.jsonl and <case>.meta.json.
	OutDir string
	// WorkBase holds each case's HOME, CODEX_HOME, TMPDIR and working directory;
	// it must not be inside TMPDIR's tree Codex is given (see agentrun.CodexConfig).
	WorkBase string
	// Cases limits the run to these case names; empty records every case.
	Cases []string
	// Logger receives progress; nil logs nothing.
	Logger *zap.Logger
}

// Entry is one line of a recording.
type Entry struct {
	// OffsetMS is the time since Codex was started.
	OffsetMS float64 `json:"t_ms"`
	// Dir is in, out or err (stdio lines), model (a model request finished) or
	// note (what the recorder did and why).
	Dir   string        `json:"dir"`
	Line  string        `json:"line,omitempty"`
	Model *ModelSummary `json:"model,omitempty"`
	Note  string        `json:"note,omitempty"`
}

// ModelSummary is what a recording keeps of a model request.
type ModelSummary struct {
	Seq      int    `json:"seq"`
	API      string `json:"api"`
	Model    string `json:"model"`
	Script   string `json:"script"`
	Step     int    `json:"step"`
	ToolCall string `json:"tool_call,omitempty"`
	Status   int    `json:"status"`
	Outcome  string `json:"outcome"`
}

// Meta describes how a recording was made.
type Meta struct {
	Case         string    `json:"case"`
	Description  string    `json:"description"`
	CodexVersion string    `json:"codex_version"`
	Args         []string  `json:"args"`
	Workdir      string    `json:"workdir"`
	CodexHome    string    `json:"codex_home"`
	ThreadID     string    `json:"thread_id"`
	RolloutPath  string    `json:"rollout_path"`
	ExitCode     int       `json:"exit_code"`
	RecordedAt   time.Time `json:"recorded_at"`
}

// Record runs the selected cases one after the other and writes their
// recordings. A case whose expected milestones do not happen fails the run.
func Record(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	prog, err := agentbin.Locate(opts.Root, agentbin.Codex)
	if err != nil {
		return err
	}
	selected, err := selectCases(opts.Cases)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("create output folder: %w", err)
	}
	for _, c := range selected {
		log.Info("recording", zap.String("case", c.name))
		if err := recordCase(ctx, prog, opts, c, log); err != nil {
			return fmt.Errorf("record %s: %w", c.name, err)
		}
	}
	return nil
}

// CaseNames lists every case in recording order.
func CaseNames() []string {
	names := make([]string, 0, len(cases))
	for _, c := range cases {
		names = append(names, c.name)
	}
	return names
}

func selectCases(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return cases, nil
	}
	var out []scenario
	for _, n := range names {
		i := slices.IndexFunc(cases, func(c scenario) bool { return c.name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown case %q (known: %v)", n, CaseNames())
		}
		out = append(out, cases[i])
	}
	return out, nil
}

func recordCase(ctx context.Context, prog agentbin.Program, opts Options, c scenario, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	base := filepath.Join(opts.WorkBase, c.name)
	if err := os.RemoveAll(base); err != nil {
		return fmt.Errorf("clear case folder: %w", err)
	}
	cfg := agentrun.CodexConfig{Command: prog.Command, PathDirs: prog.PathDirs,
		Home: filepath.Join(base, "home"), CodexHome: filepath.Join(base, "codex-home"),
		TmpDir: filepath.Join(base, "tmp"), Workdir: filepath.Join(base, "work")}
	for _, dir := range []string{cfg.Home, cfg.CodexHome, cfg.TmpDir, cfg.Workdir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create case folder: %w", err)
		}
	}
	srv := devmodel.New(devmodel.Options{Logger: log, SlowDelay: 100 * time.Millisecond})
	if err := srv.Start(ctx, "127.0.0.1:0"); err != nil {
		return err
	}
	defer srv.Close()
	cfg.BaseURL = srv.URL() + "/v1"
	spec := agentrun.CodexSpec(cfg)
	for _, f := range c.features {
		spec.Command = append(spec.Command, "-c", "features."+f+"=true")
	}
	if c.elicitServer {
		server := filepath.Join(opts.Root, "engines", "enginetest", "testdata", "mcp-echo.mjs")
		spec.Command = append(spec.Command,
			"-c", `mcp_servers.asker.command="node"`,
			"-c", fmt.Sprintf("mcp_servers.asker.args=[%q]", server),
			"-c", `mcp_servers.asker.env={MCP_ECHO_ELICIT="1"}`)
	}
	proc, err := agentrun.Start(ctx, spec)
	if err != nil {
		return err
	}
	defer proc.Kill()
	s := &session{ctx: ctx, proc: proc, srv: srv, workdir: cfg.Workdir}
	if err := s.initialize(); err != nil {
		return err
	}
	if err := s.startThread(c.approvalPolicy, c.model); err != nil {
		return err
	}
	if err := c.run(s); err != nil {
		return err
	}
	if err := proc.CloseStdin(); err != nil {
		return err
	}
	code, err := proc.Wait(ctx)
	if err != nil {
		return err
	}
	meta := Meta{Case: c.name, Description: c.description, CodexVersion: prog.Version, Args: spec.Command[1:],
		Workdir: cfg.Workdir, CodexHome: cfg.CodexHome, ThreadID: s.threadID, RolloutPath: s.rolloutPath,
		ExitCode: code, RecordedAt: time.Now().UTC()}
	return write(opts.OutDir, meta, entries(proc, srv, s.notes))
}

// entries merges stdio lines, model request summaries and notes by time.
func entries(proc *agentrun.Process, srv *devmodel.Server, notes []Entry) []Entry {
	started := proc.Started()
	var out []Entry
	for _, l := range proc.Lines() {
		out = append(out, Entry{OffsetMS: ms(l.Offset), Dir: l.Dir, Line: l.Text})
	}
	for _, r := range srv.Requests() {
		end := r.Received.Add(r.Duration).Sub(started)
		out = append(out, Entry{OffsetMS: ms(end), Dir: "model", Model: &ModelSummary{Seq: r.Seq, API: r.API, Model: r.Model,
			Script: r.Script, Step: r.Step, ToolCall: r.ToolCall, Status: r.Status, Outcome: r.Outcome}})
	}
	out = append(out, notes...)
	slices.SortStableFunc(out, func(a, b Entry) int {
		switch {
		case a.OffsetMS < b.OffsetMS:
			return -1
		case a.OffsetMS > b.OffsetMS:
			return 1
		}
		return 0
	})
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func write(dir string, meta Meta, lines []Entry) error {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, e := range lines {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("encode recording: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, meta.Case+".jsonl"), []byte(buf.String()), 0o644); err != nil {
		return fmt.Errorf("write recording: %w", err)
	}
	data, err := os.ReadFile(meta.RolloutPath)
	if err != nil {
		return fmt.Errorf("read rollout: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, meta.Case+".rollout.jsonl"), data, 0o644); err != nil {
		return fmt.Errorf("write rollout copy: %w", err)
	}
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal meta: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, meta.Case+".meta.json"), append(metaJSON, '\n'), 0o644); err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	return nil
}
