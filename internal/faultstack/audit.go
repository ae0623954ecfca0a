package faultstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/internal/uicheck"
)

// Session states and response outcomes the audit reads.
const (
	StateReady      = "READY"
	StateTerminated = "TERMINATED"
	OutcomeComplete = "completed"
	OutcomeFailed   = "failed"
	// ReasonRuntimeLost ends a response whose runtime was confirmed lost.
	ReasonRuntimeLost = "runtime_lost"
)

// Checker validates streams with the pinned `ai` client (internal/uicheck).
type Checker struct {
	v *uicheck.Validator
}

// NewChecker locates node and tools/aisdk.
func NewChecker() (*Checker, error) {
	v, err := uicheck.New()
	if err != nil {
		return nil, err
	}
	return &Checker{v: v}, nil
}

// Reply validates a transcript that holds one whole response, as the browser
// parses it, and returns the assistant message it assembles.
func (k *Checker) Reply(ctx context.Context, t Transcript) (uicheck.UIMessage, error) {
	report, err := k.v.SSE(ctx, t.SSE(), nil)
	if err != nil {
		return uicheck.UIMessage{}, err
	}
	if err := report.Err(); err != nil {
		return uicheck.UIMessage{}, fmt.Errorf("the ai client rejects the stream: %w\n%s", err, t.SSE())
	}
	if !report.Done {
		return uicheck.UIMessage{}, fmt.Errorf("the stream did not end with [DONE]:\n%s", t.SSE())
	}
	if len(report.Messages) != 1 {
		return uicheck.UIMessage{}, fmt.Errorf("the stream assembles %d messages, want 1:\n%s", len(report.Messages), t.SSE())
	}
	return report.Messages[0], nil
}

// Text joins a UI message's text parts.
func Text(m uicheck.UIMessage) string {
	var b strings.Builder
	for _, p := range m.PartsOfType("text") {
		fmt.Fprint(&b, p["text"])
	}
	return b.String()
}

// Audit is what a Session's recorded history and a full replay of its stream
// say about custody and delivery.
type Audit struct {
	SessionID string
	State     string
	// Inputs counts accepted inputs; Answered those in exactly one response,
	// AnsweredTwice those in more, Lost those in none (held or dropped).
	Inputs, Answered, AnsweredTwice, Lost int
	// Unfinished counts responses without an outcome.
	Unfinished int
	// Outcomes counts responses by outcome ("failed/runtime_lost" style keys
	// for failures).
	Outcomes map[string]int
	// Replies maps each input id to the replayed text of the response that
	// answered it (the last one, when it was answered twice).
	Replies map[string]string
	// StreamProblems lists repeated or missing parts, streams the `ai` client
	// rejects, and replayed texts that differ from the recorded history.
	StreamProblems []string
	// Held is the number of inputs the Session still holds.
	Held int
	// Responses are the recorded responses, oldest first.
	Responses []AuditResponse
}

// AuditResponse is one recorded response and its replayed text.
type AuditResponse struct {
	ResponseID string
	InputIDs   []string
	// Outcome is "completed", "failed/runtime_lost"... or "open".
	Outcome string
	Text    string
}

// Audit reads the Session's details and history and replays its whole stream,
// one response at a time, validating each with the ai client.
func (c *Client) Audit(ctx context.Context, k *Checker, sessionID string) (Audit, error) {
	a := Audit{SessionID: sessionID, Outcomes: map[string]int{}, Replies: map[string]string{}}
	view, err := c.Session(ctx, sessionID)
	if err != nil {
		return a, err
	}
	a.State, a.Held = view.State, len(view.HeldInputs)
	history, err := c.History(ctx, sessionID)
	if err != nil {
		return a, err
	}
	replayed, problems, err := c.replay(ctx, k, sessionID, view.OutputSeq)
	if err != nil {
		return a, err
	}
	a.StreamProblems = problems

	answers := map[string]int{}
	var inputs []string
	for _, m := range history {
		switch {
		case m.Metadata.ResponseID != "":
			outcome := "open"
			if m.Metadata.Outcome != nil {
				outcome = *m.Metadata.Outcome
				if m.Metadata.NativeReason != nil && *m.Metadata.NativeReason != "" && outcome != OutcomeComplete {
					outcome += "/" + *m.Metadata.NativeReason
				}
			} else {
				a.Unfinished++
			}
			a.Outcomes[outcome]++
			text, ok := replayed[m.Metadata.ResponseID]
			if !ok {
				a.StreamProblems = append(a.StreamProblems, fmt.Sprintf("response %s is not in the replayed stream", m.Metadata.ResponseID))
			} else if text != m.Text() && m.Metadata.Outcome != nil {
				a.StreamProblems = append(a.StreamProblems, fmt.Sprintf("response %s replays as %q but the history holds %q", m.Metadata.ResponseID, text, m.Text()))
			}
			a.Responses = append(a.Responses, AuditResponse{ResponseID: m.Metadata.ResponseID, InputIDs: m.Metadata.InputIDs, Outcome: outcome, Text: text})
			for _, id := range m.Metadata.InputIDs {
				answers[id]++
				a.Replies[id] = text
			}
		case m.Metadata.InputID != "":
			inputs = append(inputs, m.Metadata.InputID)
		}
	}
	a.Inputs = len(inputs)
	for _, id := range inputs {
		switch n := answers[id]; {
		case n == 1:
			a.Answered++
		case n > 1:
			a.AnsweredTwice++
		default:
			a.Lost++
		}
	}
	return a, nil
}

// replay reads the stream from 0 to through, one response per stream, and
// returns each response's text by response id (the UI message id).
func (c *Client) replay(ctx context.Context, k *Checker, sessionID string, through int64) (map[string]string, []string, error) {
	texts := map[string]string{}
	var problems []string
	after := int64(0)
	for after < through {
		t, err := c.Follow(ctx, sessionID, after, FollowOptions{Until: func(p Part) bool { return p.Seq >= through }})
		if errors.Is(err, ErrSequence) {
			problems = append(problems, fmt.Sprintf("replay after seq %d: %v", after, err))
			return texts, problems, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("replay after seq %d: %w", after, err)
		}
		report, err := k.v.SSE(ctx, withDone(t), nil)
		if err != nil {
			return nil, nil, err
		}
		if err := report.Err(); err != nil {
			problems = append(problems, fmt.Sprintf("replay after seq %d: the ai client rejects it: %v", after, err))
		}
		for _, m := range report.Messages {
			texts[m.ID] = Text(m)
		}
		after = t.Last()
	}
	return texts, problems, nil
}

// withDone frames a transcript cut by Until as a finished stream.
func withDone(t Transcript) []byte {
	if !t.Done {
		t.Done = true
	}
	return t.SSE()
}

// Err lists what is wrong with a Session that should have answered every
// input exactly once and be READY.
func (a Audit) Err() error {
	var errs []error
	if a.State != StateReady {
		errs = append(errs, fmt.Errorf("state %s, want %s", a.State, StateReady))
	}
	if a.Lost > 0 || a.AnsweredTwice > 0 || a.Held > 0 {
		errs = append(errs, fmt.Errorf("%d inputs: %d answered once, %d twice, %d unanswered, %d held", a.Inputs, a.Answered, a.AnsweredTwice, a.Lost, a.Held))
	}
	if a.Unfinished > 0 {
		errs = append(errs, fmt.Errorf("%d responses without an outcome", a.Unfinished))
	}
	for _, p := range a.StreamProblems {
		errs = append(errs, errors.New(p))
	}
	if errs == nil {
		return nil
	}
	return fmt.Errorf("session %s: %w", a.SessionID, errors.Join(errs...))
}

// OutcomeKeys lists the outcomes seen, sorted, for messages.
func (a Audit) OutcomeKeys() []string {
	var keys []string
	for k := range a.Outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
