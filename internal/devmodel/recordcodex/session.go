package recordcodex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// session drives one app-server through a scenario the way engines/codex does:
// string request ids, danger-full-access threads, the external-sandbox policy on
// every turn and our input ids as Codex's client message ids.
type session struct {
	ctx         context.Context
	proc        *agentrun.Process
	srv         *devmodel.Server
	workdir     string
	threadID    string
	rolloutPath string
	notes       []Entry
}

// message is the part of an app-server line the recorder matches on. Ids are
// kept raw: ours are strings, Codex's own server requests use numbers.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func parse(l agentrun.Line) (message, bool) {
	if l.Dir != agentrun.DirOut {
		return message{}, false
	}
	var m message
	if json.Unmarshal([]byte(l.Text), &m) != nil {
		return message{}, false
	}
	return m, true
}

func (s *session) note(format string, args ...any) {
	s.notes = append(s.notes, Entry{OffsetMS: ms(time.Since(s.proc.Started())), Dir: "note", Note: fmt.Sprintf(format, args...)})
}

// mark returns the index the next awaited line must come at or after.
func (s *session) mark() int { return len(s.proc.Lines()) }

func (s *session) await(from int, what string, match func(message) bool) (message, int, error) {
	line, idx, err := s.proc.WaitLine(s.ctx, from, func(l agentrun.Line) bool {
		m, ok := parse(l)
		return ok && match(m)
	})
	if err != nil {
		return message{}, -1, fmt.Errorf("wait for %s: %w", what, err)
	}
	m, _ := parse(line)
	return m, idx, nil
}

// call sends a request with a string id and waits for its response.
func (s *session) call(id, method string, params any) (json.RawMessage, error) {
	rawID, _ := json.Marshal(id)
	from := s.mark()
	if err := s.proc.Send(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	m, _, err := s.await(from, method+" response", func(m message) bool { return m.Method == "" && string(m.ID) == string(rawID) })
	if err != nil {
		return nil, err
	}
	if len(m.Error) > 0 {
		return nil, fmt.Errorf("%s failed: %s", method, m.Error)
	}
	return m.Result, nil
}

func (s *session) initialize() error {
	_, err := s.call("initialize", "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "astrabox", "title": "AstraBox", "version": "0.0.0"},
		"capabilities": map[string]any{"experimentalApi": true},
	})
	if err != nil {
		return err
	}
	return s.proc.Send(map[string]any{"method": "initialized"})
}

func (s *session) startThread(approvalPolicy, model string) error {
	var policy any = approvalPolicy
	if strings.HasPrefix(approvalPolicy, "{") {
		policy = json.RawMessage(approvalPolicy) // the granular object form
	}
	params := map[string]any{"cwd": s.workdir, "approvalPolicy": policy, "sandbox": "danger-full-access"}
	if model != "" {
		params["model"] = model
	}
	res, err := s.call("thread/start", "thread/start", params)
	if err != nil {
		return err
	}
	var started struct {
		Thread struct {
			ID   string `json:"id"`
			Path string `json:"path"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(res, &started); err != nil || started.Thread.ID == "" || started.Thread.Path == "" {
		return fmt.Errorf("thread/start answered without a thread id and path: %s", res)
	}
	s.threadID, s.rolloutPath = started.Thread.ID, started.Thread.Path
	// As engines/codex does: naming the thread writes its rollout before any turn.
	_, err = s.call("thread/name/set", "thread/name/set", map[string]any{"threadId": s.threadID, "name": "AstraBox recording"})
	return err
}

// send starts (or joins) a turn with a new client message id and returns the
// index to await its lines from and the turn id Codex answered with.
func (s *session) send(text string) (int, string, error) {
	from := s.mark()
	inputID := uuid.NewString()
	res, err := s.call("input:"+inputID, "turn/start", map[string]any{
		"threadId": s.threadID, "clientUserMessageId": inputID,
		"input":         []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}},
		"sandboxPolicy": map[string]any{"type": "externalSandbox", "networkAccess": "restricted"},
	})
	if err != nil {
		return -1, "", err
	}
	var started struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(res, &started); err != nil || started.Turn.ID == "" {
		return -1, "", fmt.Errorf("turn/start answered without a turn id: %s", res)
	}
	return from, started.Turn.ID, nil
}

// completed waits for turn/completed with the given status.
func (s *session) completed(from int, status string) error {
	m, _, err := s.await(from, "turn/completed", func(m message) bool { return m.Method == "turn/completed" })
	if err != nil {
		return err
	}
	var p struct {
		Turn struct {
			Status string `json:"status"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return fmt.Errorf("decode turn/completed: %w", err)
	}
	if p.Turn.Status != status {
		return fmt.Errorf("turn ended %q, want %q", p.Turn.Status, status)
	}
	return nil
}

// turn runs one input to completion.
func (s *session) turn(text string) error {
	from, _, err := s.send(text)
	if err != nil {
		return err
	}
	return s.completed(from, "completed")
}

// notification waits for a notification by method.
func (s *session) notification(from int, method string) (message, error) {
	m, _, err := s.await(from, method, func(m message) bool { return m.Method == method && len(m.ID) == 0 })
	return m, err
}

// approval waits for an approval request of method and answers it with decision.
func (s *session) approval(from int, method, decision string) error {
	m, _, err := s.await(from, method, func(m message) bool { return m.Method == method && len(m.ID) > 0 })
	if err != nil {
		return err
	}
	s.note("answer %s %s with %s", method, m.ID, decision)
	return s.proc.Send(map[string]any{"id": m.ID, "result": map[string]any{"decision": decision}})
}

// interrupt asks Codex to stop the turn.
func (s *session) interrupt(turnID string) error {
	s.note("interrupt turn %s", turnID)
	_, err := s.call("interrupt:"+turnID, "turn/interrupt", map[string]any{"threadId": s.threadID, "turnId": turnID})
	return err
}

// modelRequest waits until the scripted server has a request matching match.
func (s *session) modelRequest(what string, match func(devmodel.Request) bool) error {
	if _, err := s.srv.WaitFor(s.ctx, match); err != nil {
		return fmt.Errorf("wait for model request %s: %w", what, err)
	}
	return nil
}

var errUnexpected = errors.New("unexpected recording")
