package engines

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ProgramField names a RuntimeProfile's program definition in ProfileAdapter's
// problems ("program", "program.command"); the API shows it as the field it takes the
// definition in.
const ProgramField = "program"

// ErrNotInstalled is matched (errors.Is) by ProfileAdapter's error when no adapter is
// installed for a RuntimeProfile's engine kind.
var ErrNotInstalled = errors.New("engine not installed")

// ProgramBuilder builds the adapter of an Agent program that a RuntimeProfile defines
// itself, for an engine kind registered with RegisterProgramKind. program is the
// RuntimeProfile's definition, a JSON object. A definition it refuses is a
// *ValidationError whose fields are the definition's own ("command", "busy").
type ProgramBuilder func(kind string, program json.RawMessage) (EngineAdapter, error)

// RegisterProgramKind installs a kind whose program each RuntimeProfile defines (the
// generic ACP kind: an administrator adds a program by saving a RuntimeProfile, with
// no restart). The kind's adapters are built from the profiles by build, through
// ProfileAdapter; Adapter does not return them. A kind registered either way once
// cannot be registered again.
func (r *Registry) RegisterProgramKind(kind string, build ProgramBuilder) error {
	if kind == "" || build == nil {
		return &ValidationError{Subject: fmt.Sprintf("program kind %q", kind),
			Problems: []Problem{{Field: "engine_kind", Message: "a program kind needs a name and a builder"}}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken(kind) {
		return &ValidationError{Subject: fmt.Sprintf("program kind %q", kind),
			Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("engine kind %q is already registered", kind)}}}
	}
	r.programs[kind] = build
	return nil
}

// DefinesProgram reports whether a RuntimeProfile of kind defines its own program.
func (r *Registry) DefinesProgram(kind string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.programs[kind]
	return ok
}

// ProfileAdapter is the one way to find the adapter that runs a RuntimeProfile's
// Sessions: for a kind whose profiles define their program, the adapter built from
// program (validated as Register validates an adapter); otherwise the adapter
// registered for kind, the profile defining no program.
//
// A missing, superfluous or refused definition is a *ValidationError naming the field
// program (program.command, ...); an unknown kind matches ErrNotInstalled. Building is a decode and a validation, cheap enough to do on
// each call, so nothing is cached and a saved definition takes effect at once in every
// process that reads the profile.
func (r *Registry) ProfileAdapter(kind string, program json.RawMessage) (EngineAdapter, error) {
	r.mu.RLock()
	build, defines := r.programs[kind]
	adapter, registered := r.adapters[kind]
	r.mu.RUnlock()
	hasProgram := len(program) > 0 && string(program) != "null"
	switch {
	case defines && !hasProgram:
		return nil, &ValidationError{Subject: fmt.Sprintf("runtime profile for engine %q", kind),
			Problems: []Problem{{Field: ProgramField, Message: fmt.Sprintf("engine kind %q runs the program its RuntimeProfile defines; none is defined", kind)}}}
	case defines:
		built, err := build(kind, program)
		if err == nil {
			err = ValidateAdapter(kind, built)
		}
		if err != nil {
			return nil, NestProblems(err, ProgramField)
		}
		return built, nil
	case !registered:
		return nil, fmt.Errorf("engine kind %q: %w", kind, ErrNotInstalled)
	case hasProgram:
		return nil, &ValidationError{Subject: fmt.Sprintf("runtime profile for engine %q", kind),
			Problems: []Problem{{Field: ProgramField, Message: fmt.Sprintf("engine kind %q is an installed program; its RuntimeProfile defines none", kind)}}}
	}
	return adapter, nil
}

// taken reports whether kind is registered either way; the caller holds r.mu.
func (r *Registry) taken(kind string) bool {
	_, adapter := r.adapters[kind]
	_, program := r.programs[kind]
	return adapter || program
}

// NestProblems names the problems of a *ValidationError as members of parent
// ("command" becomes "program.command", a problem of no field parent itself); other
// errors are returned as they are.
func NestProblems(err error, parent string) error {
	var invalid *ValidationError
	if !errors.As(err, &invalid) {
		return err
	}
	for i, p := range invalid.Problems {
		if p.Field == "" {
			invalid.Problems[i].Field = parent
		} else {
			invalid.Problems[i].Field = parent + "." + p.Field
		}
	}
	return err
}
