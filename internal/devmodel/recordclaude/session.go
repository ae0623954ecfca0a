package recordclaude

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// session drives one Claude Code process through a scenario, the way the
// engine adapter will: stream-json user messages with our uuids, and the
// control protocol for initialize, approvals and interrupts.
type session struct {
	ctx     context.Context
	proc    *agentrun.Process
	srv     *devmodel.Server
	workdir string
	nextReq int
	notes   []Entry
}

func (s *session) note(format string, args ...any) {
	s.notes = append(s.notes, Entry{OffsetMS: ms(time.Since(s.proc.Started())), Dir: "note", Note: fmt.Sprintf(format, args...)})
}

// mark returns the index the next awaited line must come at or after.
func (s *session) mark() int { return len(s.proc.Lines()) }

// await waits for a stdout line matching match from index from; what names the
// milestone in the error.
func (s *session) await(from int, what string, match func(agentrun.ClaudeLine) bool) (agentrun.ClaudeLine, int, error) {
	line, idx, err := s.proc.WaitLine(s.ctx, from, func(l agentrun.Line) bool {
		cl, ok := agentrun.ParseClaudeLine(l)
		return ok && match(cl)
	})
	if err != nil {
		return agentrun.ClaudeLine{}, -1, fmt.Errorf("wait for %s: %w", what, err)
	}
	cl, _ := agentrun.ParseClaudeLine(line)
	return cl, idx, nil
}

// control sends a control_request and waits for its control_response.
func (s *session) control(request map[string]any) (json.RawMessage, error) {
	s.nextReq++
	id := fmt.Sprintf("req_%d", s.nextReq)
	from := s.mark()
	if err := s.proc.Send(map[string]any{"type": "control_request", "request_id": id, "request": request}); err != nil {
		return nil, err
	}
	line, _, err := s.proc.WaitLine(s.ctx, from, func(l agentrun.Line) bool {
		var resp struct {
			Type     string `json:"type"`
			Response struct {
				RequestID string `json:"request_id"`
			} `json:"response"`
		}
		return l.Dir == agentrun.DirOut && json.Unmarshal([]byte(l.Text), &resp) == nil &&
			resp.Type == "control_response" && resp.Response.RequestID == id
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the %v response: %w", request["subtype"], err)
	}
	return json.RawMessage(line.Text), nil
}

func (s *session) initialize() error {
	_, err := s.control(map[string]any{"subtype": "initialize", "hooks": nil})
	return err
}

// send writes a user message and returns the index it was written at.
func (s *session) send(text string) int {
	from := s.mark()
	if err := s.proc.Send(agentrun.ClaudeUserMessage(text, uuid.NewString())); err != nil {
		// A write error means Claude Code died; the next await reports it.
		s.note("stdin write failed: %v", err)
	}
	return from
}

// sendAll writes one user message per text, back to back without waiting, and
// returns the index they were written at and their uuids in order.
func (s *session) sendAll(texts []string) (int, []string) {
	from := s.mark()
	ids := make([]string, len(texts))
	for i, text := range texts {
		ids[i] = uuid.NewString()
		if err := s.proc.Send(agentrun.ClaudeUserMessage(text, ids[i])); err != nil {
			s.note("stdin write failed: %v", err)
		}
	}
	return from, ids
}

// resultsCovering waits for successful results from index from until their
// user_message_uuids name every one of ids: Claude may answer several inputs in
// one turn, so the number of results is Claude's to choose.
func (s *session) resultsCovering(from int, ids []string) error {
	missing := map[string]bool{}
	for _, id := range ids {
		missing[id] = true
	}
	for len(missing) > 0 {
		var covered []string
		res, idx, err := s.await(from, "a result", func(cl agentrun.ClaudeLine) bool {
			if cl.Type != "result" {
				return false
			}
			covered = cl.UserMessageUUIDs
			return true
		})
		if err != nil {
			return fmt.Errorf("%d inputs unanswered: %w", len(missing), err)
		}
		if res.Subtype != "success" {
			return fmt.Errorf("result subtype %q (%s), want success", res.Subtype, res.Result)
		}
		for _, id := range covered {
			delete(missing, id)
		}
		from = idx + 1
	}
	return nil
}

// result waits for the next result line and checks its subtype.
func (s *session) result(from int, subtype string) (agentrun.ClaudeLine, int, error) {
	res, idx, err := s.await(from, "result", func(cl agentrun.ClaudeLine) bool { return cl.Type == "result" })
	if err != nil {
		return res, idx, err
	}
	if res.Subtype != subtype {
		return res, idx, fmt.Errorf("result subtype %q (%s), want %q", res.Subtype, res.Result, subtype)
	}
	return res, idx, nil
}

// turn sends text and waits for a successful result.
func (s *session) turn(text string) error {
	_, _, err := s.result(s.send(text), "success")
	return err
}

// firstDelta waits for the first streamed text delta after from.
func (s *session) firstDelta(from int) error {
	_, _, err := s.await(from, "a text delta", func(cl agentrun.ClaudeLine) bool {
		return cl.Type == "stream_event" && strings.Contains(string(cl.Event), `"text_delta"`)
	})
	return err
}

// permission waits for a can_use_tool request and answers it.
func (s *session) permission(from int, allow bool, denyMessage string) error {
	req, _, err := s.await(from, "can_use_tool", func(cl agentrun.ClaudeLine) bool {
		return cl.Type == "control_request" && strings.Contains(string(cl.Request), `"can_use_tool"`)
	})
	if err != nil {
		return err
	}
	var body struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(req.Request, &body); err != nil {
		return fmt.Errorf("parse can_use_tool: %w", err)
	}
	answer := map[string]any{"behavior": "deny", "message": denyMessage}
	if allow {
		answer = map[string]any{"behavior": "allow", "updatedInput": body.Input}
	}
	s.note("answer can_use_tool %s with %s", req.RequestID, answer["behavior"])
	return s.proc.Send(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": req.RequestID, "response": answer,
	}})
}

// modelRequest waits until the model server has seen a request matching match.
func (s *session) modelRequest(what string, match func(devmodel.Request) bool) error {
	if _, err := s.srv.WaitFor(s.ctx, match); err != nil {
		return fmt.Errorf("wait for model request (%s): %w", what, err)
	}
	return nil
}

// toolSignal makes a FIFO that a scripted command writes to when it starts, so
// the recorder knows the tool is running without polling. wait blocks until the
// command has written.
func (s *session) toolSignal(name string) (path string, wait func() error, err error) {
	path = filepath.Join(s.workdir, name+".fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return "", nil, fmt.Errorf("make tool signal fifo: %w", err)
	}
	got := make(chan error, 1)
	go func() {
		// Opening for reading blocks until the command opens it for writing.
		f, err := os.Open(path)
		if err != nil {
			got <- fmt.Errorf("open tool signal: %w", err)
			return
		}
		defer f.Close()
		_, err = io.ReadAll(f)
		got <- err
	}()
	wait = func() error {
		select {
		case err := <-got:
			if err == nil {
				s.note("the tool command signalled that it runs")
			}
			return err
		case <-s.ctx.Done():
			// Unblock the reader so its goroutine ends.
			if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			return fmt.Errorf("wait for the tool to start: %w", s.ctx.Err())
		}
	}
	return path, wait, nil
}

func sortEntries(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int {
		switch {
		case a.OffsetMS < b.OffsetMS:
			return -1
		case a.OffsetMS > b.OffsetMS:
			return 1
		}
		return 0
	})
}
