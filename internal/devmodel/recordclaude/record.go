// Package recordclaude records the pinned Claude Code release, run headless
// against the scripted model server, through a fixed set of scenarios (plain
// text, tool call, approval allow and deny, interrupt while streaming, messages
// sent while working, model errors). Each recording keeps the exact stdin lines
// sent, the stdout and stderr lines received with their offsets, a summary of
// the model requests, and the transcript JSONL Claude Code wrote: the raw
// material event translation is tested on.
package recordclaude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// DefaultOutDir is where recordings go, relative to the repository root.
const DefaultOutDir = "engines/claude/testdata/native"

// Options configure Record.
type Options struct {
	// Root is the repository root (agentbin.Root).
	Root string
	// OutDir receives <case>.jsonl, <case>.transcript.jsonl and <case>.meta.json.
	OutDir string
	// WorkBase holds each case's HOME, CLAUDE_CONFIG_DIR and working directory;
	// a fixed path keeps the recorded paths stable from one recording to the next.
	WorkBase string
	// Cases limits the run to these case names; empty records every case.
	Cases []string
	// Logger receives progress; nil logs nothing.
	Logger *zap.Logger
}

// Entry is one line of a recording.
type Entry struct {
	// OffsetMS is the time since Claude Code was started.
	OffsetMS float64 `json:"t_ms"`
	// Dir is in, out or err (stdio lines), model (a model request finished) or
	// note (what the recorder did and why).
	Dir string `json:"dir"`
	// Line is the exact text of a stdio line.
	Line string `json:"line,omitempty"`
	// Model summarises a model request.
	Model *ModelSummary `json:"model,omitempty"`
	// Note explains a step of the scenario.
	Note string `json:"note,omitempty"`
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
	Case           string    `json:"case"`
	Description    string    `json:"description"`
	ClaudeVersion  string    `json:"claude_version"`
	Args           []string  `json:"args"`
	Env            []string  `json:"env"`
	Workdir        string    `json:"workdir"`
	ConfigDir      string    `json:"config_dir"`
	SessionID      string    `json:"session_id"`
	ExitCode       int       `json:"exit_code"`
	RecordedAt     time.Time `json:"recorded_at"`
	TranscriptPath string    `json:"transcript_path"`
}

// Record runs the selected cases one after the other and writes their
// recordings. A case whose expected milestones do not happen fails the run.
func Record(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	prog, err := agentbin.Locate(opts.Root, agentbin.Claude)
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
		found := false
		for _, c := range cases {
			if c.name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q (known: %v)", n, CaseNames())
		}
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
	cfg := agentrun.ClaudeConfig{
		Command: prog.Command, Home: filepath.Join(base, "home"), ConfigDir: filepath.Join(base, "claude-config"),
		Workdir: filepath.Join(base, "work"), PermissionMode: c.permissionMode, SessionID: uuid.NewString(),
		ExtraEnv: []string{"CLAUDE_CODE_TMPDIR=" + filepath.Join(base, "tmp")},
	}
	for _, dir := range []string{cfg.Home, cfg.ConfigDir, cfg.Workdir, filepath.Join(base, "tmp")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create case folder: %w", err)
		}
	}
	srv := devmodel.New(devmodel.Options{Logger: log, SlowDelay: 100 * time.Millisecond})
	if err := srv.Start(ctx, "127.0.0.1:0"); err != nil {
		return err
	}
	defer srv.Close()
	cfg.BaseURL = srv.URL()
	spec := agentrun.ClaudeSpec(cfg)
	proc, err := agentrun.Start(ctx, spec)
	if err != nil {
		return err
	}
	defer proc.Kill()
	s := &session{ctx: ctx, proc: proc, srv: srv, workdir: cfg.Workdir}
	if err := s.initialize(); err != nil {
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
	transcript := agentrun.ClaudeTranscriptPath(cfg.ConfigDir, cfg.Workdir, cfg.SessionID)
	meta := Meta{Case: c.name, Description: c.description, ClaudeVersion: prog.Version, Args: spec.Command[1:],
		Env: redactedEnv(spec.Env), Workdir: cfg.Workdir, ConfigDir: cfg.ConfigDir, SessionID: cfg.SessionID,
		ExitCode: code, RecordedAt: time.Now().UTC(), TranscriptPath: transcript}
	return write(opts.OutDir, meta, entries(proc, srv, s.notes), transcript)
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
	sortEntries(out)
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// redactedEnv keeps the environment a recording ran with, minus the key and PATH.
func redactedEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		switch {
		case len(kv) > 5 && kv[:5] == "PATH=":
		case len(kv) > 18 && kv[:18] == "ANTHROPIC_API_KEY=":
			out = append(out, "ANTHROPIC_API_KEY=<placeholder>")
		default:
			out = append(out, kv)
		}
	}
	return out
}

func write(dir string, meta Meta, lines []Entry, transcript string) error {
	f, err := os.Create(filepath.Join(dir, meta.Case+".jsonl"))
	if err != nil {
		return fmt.Errorf("create recording: %w", err)
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, e := range lines {
		if err := enc.Encode(e); err != nil {
			_ = f.Close()
			return fmt.Errorf("write recording: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close recording: %w", err)
	}
	data, err := os.ReadFile(transcript)
	if err != nil {
		return fmt.Errorf("read transcript: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, meta.Case+".transcript.jsonl"), data, 0o644); err != nil {
		return fmt.Errorf("write transcript copy: %w", err)
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
