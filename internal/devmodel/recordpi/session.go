package recordpi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// session drives one `pi --mode rpc` through a scenario the way engines/pi does:
// every input is a prompt with id "input:<input id>", the text behind the input id
// marker and streamingBehavior steer; an interrupt is an abort.
type session struct {
	ctx   context.Context
	proc  *agentrun.Process
	srv   *devmodel.Server
	notes []Entry
}

// message is the part of an rpc line the recorder matches on.
type message struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Command  string          `json:"command"`
	Success  *bool           `json:"success"`
	Method   string          `json:"method"`
	Data     json.RawMessage `json:"data"`
	Messages json.RawMessage `json:"messages"`
	Event    struct {
		Type string `json:"type"`
	} `json:"assistantMessageEvent"`
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

func isType(typ string) func(message) bool { return func(m message) bool { return m.Type == typ } }

func isDelta(typ string) func(message) bool {
	return func(m message) bool { return m.Type == "message_update" && m.Event.Type == typ }
}

func isSelect(m message) bool { return m.Type == "extension_ui_request" && m.Method == "select" }

func (s *session) note(format string, args ...any) {
	s.notes = append(s.notes, Entry{OffsetMS: ms(time.Since(s.proc.Started())), Dir: "note", Note: fmt.Sprintf(format, args...)})
}

func (s *session) mark() int { return len(s.proc.Lines()) }

func (s *session) await(from int, what string, match func(message) bool) (message, error) {
	line, _, err := s.proc.WaitLine(s.ctx, from, func(l agentrun.Line) bool {
		m, ok := parse(l)
		return ok && match(m)
	})
	if err != nil {
		return message{}, fmt.Errorf("wait for %s: %w", what, err)
	}
	m, _ := parse(line)
	return m, nil
}

// call sends a command and waits for its successful response.
func (s *session) call(cmd map[string]any) (message, error) {
	from := s.mark()
	if err := s.proc.Send(cmd); err != nil {
		return message{}, err
	}
	id := cmd["id"].(string)
	m, err := s.await(from, fmt.Sprint(cmd["type"], " response"), func(m message) bool { return m.Type == "response" && m.ID == id })
	if err != nil {
		return message{}, err
	}
	if m.Success == nil || !*m.Success {
		return message{}, fmt.Errorf("%w: pi refused %s", errUnexpected, cmd["type"])
	}
	return m, nil
}

// state asks for get_state, as engines/pi does when it starts Pi.
func (s *session) state() (json.RawMessage, error) {
	m, err := s.call(map[string]any{"id": "state", "type": "get_state"})
	return m.Data, err
}

// send sends an input and returns the index to await its lines from.
func (s *session) send(text string) (int, error) {
	from := s.mark()
	id := uuid.NewString()
	_, err := s.call(map[string]any{"id": "input:" + id, "type": "prompt", "message": pi.InputMarker(id) + text, "streamingBehavior": "steer"})
	return from, err
}

// ended waits for agent_end and checks the stop reason of its last assistant
// message.
func (s *session) ended(from int, stopReason string) error {
	m, err := s.await(from, "agent_end", isType("agent_end"))
	if err != nil {
		return err
	}
	var msgs []struct {
		Role       string `json:"role"`
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(m.Messages, &msgs); err != nil {
		return fmt.Errorf("decode agent_end: %w", err)
	}
	last := ""
	for _, msg := range msgs {
		if msg.Role == "assistant" {
			last = msg.StopReason
		}
	}
	if last != stopReason {
		return fmt.Errorf("%w: the run ended %q, want %q", errUnexpected, last, stopReason)
	}
	return nil
}

func (s *session) turn(text, stopReason string) error {
	from, err := s.send(text)
	if err != nil {
		return err
	}
	return s.ended(from, stopReason)
}

// abort asks Pi to stop; its response may come after agent_end, so it is not
// awaited.
func (s *session) abort() error {
	s.note("abort")
	return s.proc.Send(map[string]any{"id": "abort:" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8], "type": "abort"})
}

func (s *session) modelRequest(what string, match func(devmodel.Request) bool) error {
	if _, err := s.srv.WaitFor(s.ctx, match); err != nil {
		return fmt.Errorf("wait for model request %s: %w", what, err)
	}
	return nil
}

var errUnexpected = errors.New("unexpected recording")
