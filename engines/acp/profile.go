package acp

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// BusyPrompt is what a program does with a prompt sent while a prompt of the same
// session is still running, as observed and declared per profile.
type BusyPrompt string

// The busy-prompt behaviours.
const (
	// BusyQueued: the program runs the second prompt as its own turn after the first
	// (claude-agent-acp, codex-acp).
	BusyQueued BusyPrompt = "queued"
	// BusyCancels: the program ends the running turn (cancelled or failed) and runs
	// the second prompt (Gemini CLI, Qwen Code).
	BusyCancels BusyPrompt = "cancels"
	// BusyJoined: the program folds the second prompt into the running turn and
	// answers both prompts when it ends (opencode).
	BusyJoined BusyPrompt = "joined"
	// BusyRefused: the program refuses a prompt while one runs (DeepSeek Harness's ACP
	// bridge answers -32602). The client holds the input and sends it once the running
	// prompt is answered; the platform keeps custody until the program admits it.
	BusyRefused BusyPrompt = "refused"
)

// Admission names where a profile's program durably records an input.
type Admission string

// The admission sources.
const (
	// AdmissionPromptReply: the program's reply to session/prompt. ACP version 1 has
	// no earlier acknowledgement; the platform keeps the input in custody until the
	// program answered the prompt, by when every shipped program has written it.
	AdmissionPromptReply Admission = "prompt_reply"
	// AdmissionSessionLog: the program's session log (its JSONL transcript) holds the
	// prompt's user record. ACP version 1 carries no id of ours into it, so the record
	// is found by the prompt's text, after the lines the log held when the prompt was
	// sent; the prompt's reply admits it in any case.
	AdmissionSessionLog Admission = "session_log"
)

// ResumeMethod is how a replacement process reopens a session.
type ResumeMethod string

// The resume methods.
const (
	// ResumeLoad: session/load, which replays the history as updates first.
	ResumeLoad ResumeMethod = "load"
	// ResumeResume: session/resume, which replays nothing.
	ResumeResume ResumeMethod = "resume"
)

// Profile describes one ACP program. A profile is configuration: a new ACP program
// needs a profile, not code. Paths in Command, Env and Files may use the placeholders
// {home} (the conversation's home folder), {state} (the state folder), {workspace} and
// {model_base_url}; Files are relative to {home}.
type Profile struct {
	// Kind is the engine_kind the program is registered under.
	Kind string `json:"kind" yaml:"kind"`
	// Title names the program for people ("Claude Code through claude-agent-acp").
	Title string `json:"title" yaml:"title"`
	// Command is the program's argv in the box.
	Command []string `json:"command" yaml:"command"`
	// Env is added to the program's environment.
	Env map[string]string `json:"env,omitempty" yaml:"env"`
	// ModelKeyEnv is the variable the program reads its (placeholder) model key from;
	// the platform's forwarder adds the real credential on the host side.
	ModelKeyEnv string `json:"model_key_env" yaml:"model_key_env"`
	// Files are written before the program starts (its settings), relative to {home}.
	Files map[string]string `json:"files,omitempty" yaml:"files"`
	// StateDir is the program's state folder under {home} (".claude", ".codex",
	// ".gemini"); StateDirEnv, when the program has one, is the variable that moves it.
	StateDir    string `json:"state_dir" yaml:"state_dir"`
	StateDirEnv string `json:"state_dir_env,omitempty" yaml:"state_dir_env"`
	// SessionLog locates the session's transcript under StateDir, with the placeholder
	// {engine_session_key} (or {engine_session_key_8}, its first 8 characters) and
	// globs; the platform mirrors it and restores it in a new box. Empty when the
	// program keeps no JSONL transcript the platform can mirror.
	SessionLog string `json:"session_log,omitempty" yaml:"session_log"`
	// StateFiles are file names under StateDir of the state to save and restore when
	// the program keeps no JSONL transcript (opencode's SQLite database and its WAL):
	// the client saves them into the platform's runtime-state storage before the box
	// is released, and the adapter writes them back into a new box.
	StateFiles []string `json:"state_files,omitempty" yaml:"state_files"`
	// Modes are the program's own session mode ids offered as permission modes, and
	// DefaultMode the one a new Session starts in. Empty when the program has none.
	Modes       []string `json:"modes,omitempty" yaml:"modes"`
	DefaultMode string   `json:"default_mode,omitempty" yaml:"default_mode"`
	// Busy is what the program does with a prompt sent while busy.
	Busy BusyPrompt `json:"busy" yaml:"busy"`
	// Admission is where the program durably records an input.
	Admission Admission `json:"admission" yaml:"admission"`
	// Resume is how a replacement process reopens the session.
	Resume ResumeMethod `json:"resume" yaml:"resume"`
	// NewSessionMeta is sent as _meta of session/new (program options such as
	// turning off prompt suggestions, which cost a model call per turn).
	NewSessionMeta map[string]any `json:"new_session_meta,omitempty" yaml:"new_session_meta"`
	// MCPTransports are the MCP transports of an Agent's MCP servers the program takes
	// through ACP's mcpServers of session/new, session/load and session/resume (stdio,
	// and http or sse where the program's initialize reply offers them). Empty: the
	// program gets no MCP servers and an Agent naming one is refused on save.
	MCPTransports []engines.MCPTransport `json:"mcp_transports,omitempty" yaml:"mcp_transports"`
	// InstructionsFile is where, relative to StateDir, the program reads standing
	// instructions (CLAUDE.md, AGENTS.md); the adapter writes the Agent's instructions
	// there before every start. Empty: the Agent's instructions are refused on save.
	InstructionsFile string `json:"instructions_file,omitempty" yaml:"instructions_file"`
	// ModeUpdateText starts the agent text the program sends instead of
	// current_mode_update when its mode changes (Gemini CLI's "[MODE_UPDATE] "); such
	// a text chunk is kept out of the stream. Empty when the program has none.
	ModeUpdateText string `json:"mode_update_text,omitempty" yaml:"mode_update_text"`
	// LoadAfterStartMinute says the program loses a session it reopens (session/load)
	// within the wall-clock minute the session started in (Gemini CLI names its chat
	// file by that minute and starts the same file again); the adapter then waits for
	// a later minute before session/load.
	LoadAfterStartMinute bool `json:"load_after_start_minute,omitempty" yaml:"load_after_start_minute"`
	// ReportsUsage says the program's prompt reply carries token usage.
	ReportsUsage bool `json:"reports_usage" yaml:"reports_usage"`
	// Quirks are known deviations the adapter works around or reports.
	Quirks []string `json:"quirks,omitempty" yaml:"quirks"`
}

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{1,62}$`)

// Validate checks a profile names everything the adapter needs. It returns a
// *engines.ValidationError listing every problem, each naming its field as the
// profile's JSON does ("command", "busy"), so a RuntimeProfile that defines the program
// is refused with the field named.
func (p Profile) Validate() error {
	var problems []engines.Problem
	add := func(field, format string, args ...any) {
		problems = append(problems, engines.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !kindPattern.MatchString(p.Kind) {
		add("kind", "%q must be lower-case letters, digits, '-' or '_' (2 to 63, starting with a letter)", p.Kind)
	}
	if len(p.Command) == 0 || strings.TrimSpace(p.Command[0]) == "" {
		add("command", "is required")
	}
	if p.ModelKeyEnv == "" {
		add("model_key_env", "is required")
	}
	if p.StateDir == "" || path.IsAbs(p.StateDir) || strings.Contains(p.StateDir, "..") {
		add("state_dir", "%q must be a folder name under the home folder", p.StateDir)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Files)) {
		if name == "" || path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
			add("files", "%q must be a path under the home folder", name)
		}
	}
	if p.SessionLog != "" && !strings.Contains(p.SessionLog, engines.SessionLogKeyPlaceholder) && !strings.Contains(p.SessionLog, engines.SessionLogShortKeyPlaceholder) {
		add("session_log", "%q must contain {engine_session_key} or {engine_session_key_8}", p.SessionLog)
	}
	for _, f := range p.StateFiles {
		if f == "" || path.IsAbs(f) || slices.Contains(strings.Split(f, "/"), "..") {
			add("state_files", "%q must be a file name under the state folder", f)
		}
	}
	for _, t := range p.MCPTransports {
		if !slices.Contains([]engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP, engines.MCPTransportSSE}, t) {
			add("mcp_transports", "%q must be stdio, http or sse", t)
		}
	}
	if f := p.InstructionsFile; f != "" && (path.IsAbs(f) || path.Clean(f) != f || slices.Contains(strings.Split(f, "/"), "..")) {
		add("instructions_file", "%q must be a path under the state folder", f)
	}
	if len(p.Modes) > 0 && !slices.Contains(p.Modes, p.DefaultMode) {
		add("default_mode", "%q is not one of modes %v", p.DefaultMode, p.Modes)
	}
	if len(p.Modes) == 0 && p.DefaultMode != "" {
		add("default_mode", "needs modes")
	}
	switch p.Busy {
	case BusyQueued, BusyCancels, BusyJoined, BusyRefused:
	default:
		add("busy", "%q must be queued, cancels, joined or refused", p.Busy)
	}
	switch p.Admission {
	case AdmissionPromptReply:
	case AdmissionSessionLog:
		if p.SessionLog == "" {
			add("admission", "session_log needs session_log")
		}
	default:
		add("admission", "%q must be prompt_reply or session_log", p.Admission)
	}
	switch p.Resume {
	case ResumeLoad, ResumeResume:
	default:
		add("resume", "%q must be load or resume", p.Resume)
	}
	if len(problems) > 0 {
		return &engines.ValidationError{Subject: fmt.Sprintf("acp profile %q", p.Kind), Problems: problems}
	}
	return nil
}

// expand replaces the profile placeholders in s.
func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}
