// Package enginebox lets engine adapters drive a sandbox: it presents a
// sandbox.Handle as the engines.Box an adapter's ActivateRuntime and runtime
// client use, translating between the two vocabularies (process ids and
// names, offsets "after" and "from", signal and exit conventions). Keeping the
// bridge here lets engines stay free of the sandbox package and keeps lifecycle
// decisions (claim, create, replace, release) out of adapters' reach.
package enginebox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"strings"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// Box is a sandbox.Handle seen as an engines.Box.
type Box struct {
	h sandbox.Handle
}

var (
	_ engines.Box            = (*Box)(nil)
	_ engines.ProcessSession = (*process)(nil)
)

// New wraps h. The Box does not own h: closing h stays the caller's job.
func New(h sandbox.Handle) *Box { return &Box{h: h} }

// ID implements engines.Box.
func (b *Box) ID() string { return b.h.ID() }

// StartProcess implements engines.Box. Backends run every process of a box as
// the box's own account, which is the conversation's account under
// per-conversation tenancy; an identity therefore selects the home and working
// directory and is checked for completeness, not switched to.
func (b *Box) StartProcess(ctx context.Context, spec engines.ProcessSpec) (engines.ProcessSession, error) {
	if err := checkIdentity(spec.Identity); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(spec.Env)+1)
	dir := spec.Dir
	if id := spec.Identity; id != nil {
		env["HOME"] = id.HomeDir
		if dir == "" {
			dir = id.WorkspaceDir
		}
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	_, err := b.h.StartProcess(ctx, sandbox.ProcessSpec{
		ID:   spec.Name,
		Argv: spec.Command,
		Dir:  dir,
		Env:  env,
	})
	if err != nil {
		return nil, fmt.Errorf("start process %s in box %s: %w", spec.Name, b.h.ID(), err)
	}
	return &process{h: b.h, name: spec.Name}, nil
}

// ReadFile implements engines.Box.
func (b *Box) ReadFile(ctx context.Context, identity *engines.RuntimeIdentity, path string) ([]byte, error) {
	if err := checkIdentity(identity); err != nil {
		return nil, err
	}
	data, err := b.h.ReadFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("read %s in box %s: %w", path, b.h.ID(), err)
	}
	return data, nil
}

// ReadFileFrom implements engines.FileTailReader.
func (b *Box) ReadFileFrom(ctx context.Context, identity *engines.RuntimeIdentity, path string, offset int64) ([]byte, int64, error) {
	if err := checkIdentity(identity); err != nil {
		return nil, 0, err
	}
	data, size, err := b.h.ReadFileFrom(ctx, path, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s in box %s: %w", path, b.h.ID(), err)
	}
	return data, size, nil
}

// WriteFile implements engines.Box.
func (b *Box) WriteFile(ctx context.Context, identity *engines.RuntimeIdentity, path string, data []byte, perm uint32) error {
	if err := checkIdentity(identity); err != nil {
		return err
	}
	if err := b.h.WriteFile(ctx, path, data, perm); err != nil {
		return fmt.Errorf("write %s in box %s: %w", path, b.h.ID(), err)
	}
	return nil
}

// DialPort implements engines.Box.
func (b *Box) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := b.h.DialPort(ctx, port)
	if err != nil {
		return nil, fmt.Errorf("dial port %d in box %s: %w", port, b.h.ID(), err)
	}
	return conn, nil
}

// checkIdentity refuses an incomplete identity before anything is written; nil
// addresses the box filesystem.
func checkIdentity(id *engines.RuntimeIdentity) error {
	if id == nil {
		return nil
	}
	if err := id.Validate(); err != nil {
		return fmt.Errorf("runtime identity: %w", err)
	}
	return nil
}

// process is one process session of the box.
type process struct {
	h    sandbox.Handle
	name string
}

func (p *process) Name() string { return p.name }

func (p *process) WriteStdin(ctx context.Context, writeID string, data []byte) error {
	if _, err := p.h.WriteStdin(ctx, p.name, writeID, data); err != nil {
		return fmt.Errorf("write stdin of %s: %w", p.name, err)
	}
	return nil
}

// ReadOutput implements engines.ProcessSession. The engine contract counts from
// an offset (lines at or after it) while the sandbox reads after one, hence
// offset-1.
func (p *process) ReadOutput(ctx context.Context, offset int64, follow bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		stream, err := p.h.ReadOutput(ctx, p.name, max(offset-1, 0), follow)
		if err != nil {
			yield(engines.OutputLine{}, fmt.Errorf("read output of %s: %w", p.name, err))
			return
		}
		defer stream.Close()
		for {
			line, err := stream.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(engines.OutputLine{}, fmt.Errorf("read output of %s: %w", p.name, err))
				return
			}
			if !yield(engines.OutputLine{Offset: line.Offset, Stream: engines.OutputStream(line.Stream), Data: line.Data}, nil) {
				return
			}
		}
	}
}

// CommitOutput lets the box free the journalled lines through the given offset:
// the platform has recorded everything they produced. Runtime clients whose
// vendor keeps history only until its reader has it call it from Committed.
func (p *process) CommitOutput(ctx context.Context, through int64) error {
	if err := p.h.CommitOutput(ctx, p.name, through); err != nil {
		return fmt.Errorf("commit output of %s through %d: %w", p.name, through, err)
	}
	return nil
}

// OutputEnd is the offset after the newest journalled line: reading from there
// yields only lines written later, whatever was freed before.
func (p *process) OutputEnd(ctx context.Context) (int64, error) {
	st, err := p.h.Process(ctx, p.name)
	if err != nil {
		return 0, fmt.Errorf("status of %s: %w", p.name, err)
	}
	return st.LastOffset + 1, nil
}

// Signal implements engines.ProcessSession; "INT" and "SIGINT" both work.
func (p *process) Signal(ctx context.Context, signal string) error {
	name := strings.ToUpper(signal)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if err := p.h.Signal(ctx, p.name, name, false); err != nil {
		return fmt.Errorf("signal %s to %s: %w", name, p.name, err)
	}
	return nil
}

// ExitStatus implements engines.ProcessSession, reporting a signal death as the
// engine contract does (code -1 and the signal's name).
func (p *process) ExitStatus(ctx context.Context) (*engines.ExitStatus, error) {
	st, err := p.h.Process(ctx, p.name)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", p.name, err)
	}
	if st.Exit == nil {
		return nil, nil
	}
	if st.Exit.Signal != "" {
		return &engines.ExitStatus{Code: -1, Signal: strings.TrimPrefix(st.Exit.Signal, "SIG")}, nil
	}
	return &engines.ExitStatus{Code: st.Exit.Code}, nil
}
