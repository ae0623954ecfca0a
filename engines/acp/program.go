package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// KindProgram is the engine kind whose RuntimeProfiles define their ACP program
// themselves (a RuntimeProfile's acp_program): adding an ACP program is saving a
// RuntimeProfile, with no configuration entry and no restart.
const KindProgram = "acp"

// ModelAPI is the model API a program speaks, which selects the box's model forward
// and the {model_base_url} the program is given.
type ModelAPI string

// The model APIs.
const (
	// ModelAPIAnthropic: Anthropic Messages through the box's default model forward.
	ModelAPIAnthropic ModelAPI = "anthropic"
	// ModelAPIOpenAI: the OpenAI API (Responses or Chat Completions) through the OpenAI
	// forward; the base URL ends in /v1.
	ModelAPIOpenAI ModelAPI = "openai"
	// ModelAPIGemini: the Gemini API through its forward; the base URL has no version,
	// which the program's SDK adds (/v1beta).
	ModelAPIGemini ModelAPI = "gemini"
)

// Program is an ACP program as an operator defines it, in a RuntimeProfile's
// acp_program or in the configuration's engines.acp_programs: the fields of a Profile
// an operator sets, and the model API the program speaks. Its kind is where it is
// defined: the RuntimeProfile's engine kind (KindProgram), or the configuration
// entry's own.
type Program struct {
	Title                string                 `json:"title,omitempty"`
	Command              []string               `json:"command"`
	Env                  map[string]string      `json:"env,omitempty"`
	Files                map[string]string      `json:"files,omitempty"`
	ModelKeyEnv          string                 `json:"model_key_env"`
	ModelAPI             ModelAPI               `json:"model_api,omitempty"`
	StateDir             string                 `json:"state_dir"`
	StateDirEnv          string                 `json:"state_dir_env,omitempty"`
	SessionLog           string                 `json:"session_log,omitempty"`
	StateFiles           []string               `json:"state_files,omitempty"`
	Modes                []string               `json:"modes,omitempty"`
	DefaultMode          string                 `json:"default_mode,omitempty"`
	Busy                 BusyPrompt             `json:"busy"`
	Admission            Admission              `json:"admission"`
	Resume               ResumeMethod           `json:"resume"`
	MCPTransports        []engines.MCPTransport `json:"mcp_transports,omitempty"`
	InstructionsFile     string                 `json:"instructions_file,omitempty"`
	ModeUpdateText       string                 `json:"mode_update_text,omitempty"`
	LoadAfterStartMinute bool                   `json:"load_after_start_minute,omitempty"`
	NewSessionMeta       map[string]any         `json:"new_session_meta,omitempty"`
}

// Profile is the program's profile under kind.
func (p Program) Profile(kind string) Profile {
	return Profile{Kind: kind, Title: p.Title, Command: p.Command, Env: p.Env, Files: p.Files, ModelKeyEnv: p.ModelKeyEnv,
		StateDir: p.StateDir, StateDirEnv: p.StateDirEnv, SessionLog: p.SessionLog, StateFiles: p.StateFiles,
		Modes: p.Modes, DefaultMode: p.DefaultMode, Busy: p.Busy, Admission: p.Admission, Resume: p.Resume,
		MCPTransports: p.MCPTransports, InstructionsFile: p.InstructionsFile, ModeUpdateText: p.ModeUpdateText,
		LoadAfterStartMinute: p.LoadAfterStartMinute, NewSessionMeta: p.NewSessionMeta}
}

// Validate checks the program's profile under kind and its model API, returning a
// *engines.ValidationError naming each field.
func (p Program) Validate(kind string) error {
	var problems []engines.Problem
	var invalid *engines.ValidationError
	if err := p.Profile(kind).Validate(); errors.As(err, &invalid) {
		problems = invalid.Problems
	} else if err != nil {
		return err
	}
	switch p.ModelAPI {
	case "", ModelAPIAnthropic, ModelAPIOpenAI, ModelAPIGemini:
	default:
		problems = append(problems, engines.Problem{Field: "model_api", Message: fmt.Sprintf("%q must be anthropic, openai or gemini", p.ModelAPI)})
	}
	if len(problems) > 0 {
		return &engines.ValidationError{Subject: fmt.Sprintf("acp program %q", kind), Problems: problems}
	}
	return nil
}

// ParseProgram decodes a program definition strictly (a JSON object, every field
// known and of its type) and validates it under kind. A refused definition is a
// *engines.ValidationError naming the field.
func ParseProgram(kind string, raw json.RawMessage) (Program, error) {
	refuse := func(field, format string, args ...any) (Program, error) {
		return Program{}, &engines.ValidationError{Subject: fmt.Sprintf("acp program %q", kind),
			Problems: []engines.Problem{{Field: field, Message: fmt.Sprintf(format, args...)}}}
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return refuse("", "must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var p Program
	if err := dec.Decode(&p); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return refuse(typeErr.Field, "must be %s, not %s", typeErr.Type, typeErr.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return refuse(strings.Trim(name, `"`), "is not a field of an ACP program")
		}
		return refuse("", "is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return refuse("", "has data after the JSON object")
	}
	if err := p.Validate(kind); err != nil {
		return Program{}, err
	}
	return p, nil
}

// NewProgramAdapter is the adapter of an operator's program under kind; baseURL says
// where in the box the program reaches the model service for its model API (the
// forward the platform gives that API), the {model_base_url} of the program.
func NewProgramAdapter(kind string, prog Program, baseURL func(ModelAPI) string) (*Adapter, error) {
	if err := prog.Validate(kind); err != nil {
		return nil, err
	}
	return NewAdapter(Config{Profile: prog.Profile(kind), ModelBaseURL: baseURL(prog.ModelAPI)})
}

// ProgramBuilder is the engines.ProgramBuilder of KindProgram: it parses a
// RuntimeProfile's acp_program and builds its adapter with NewProgramAdapter.
func ProgramBuilder(baseURL func(ModelAPI) string) engines.ProgramBuilder {
	return func(kind string, raw json.RawMessage) (engines.EngineAdapter, error) {
		prog, err := ParseProgram(kind, raw)
		if err != nil {
			return nil, err
		}
		return NewProgramAdapter(kind, prog, baseURL)
	}
}
