package devmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// API names recorded in Request.API.
const (
	APIAnthropicMessages    = "anthropic.messages"
	APIAnthropicCountTokens = "anthropic.count_tokens"
	APIOpenAIResponses      = "openai.responses"
	APIOpenAIChat           = "openai.chat_completions"
	// APIGeminiGenerateContent is the Gemini API's generateContent and
	// streamGenerateContent (Request.Stream tells which).
	APIGeminiGenerateContent = "gemini.generate_content"
	APIGeminiCountTokens     = "gemini.count_tokens"
	APIModels                = "models"
	APIOther                 = "other"
)

// Outcomes recorded in Request.Outcome.
const (
	// OutcomeActive means the reply is still being sent.
	OutcomeActive = "active"
	// OutcomeCompleted means the whole reply was sent.
	OutcomeCompleted = "completed"
	// OutcomeCancelled means the client went away (or the server closed) before
	// the reply was complete, as when a program interrupts a streaming turn.
	OutcomeCancelled = "cancelled"
	// OutcomeFailed means the server answered with an HTTP error.
	OutcomeFailed = "failed"
)

// Request is one entry of the request log.
type Request struct {
	// Seq numbers requests from 1 in arrival order.
	Seq      int
	Received time.Time
	Method   string
	Path     string
	RawQuery string
	API      string
	// Header holds the request headers with credentials redacted.
	Header http.Header
	// Body is the request body as received.
	Body   json.RawMessage
	Model  string
	Stream bool
	// Tools lists the tool names the program offered.
	Tools []string
	// Prompt is the text of the newest prompt, directive included.
	Prompt string
	// Script is the script that answered, and Step how many tool results of the
	// turn had come back (0 for the first request of a turn).
	Script string
	Step   int
	// ToolCall names the tool the reply called, if any.
	ToolCall string
	// Reply is the reply's text (text blocks only).
	Reply    string
	Status   int
	Outcome  string
	Duration time.Duration
}

// DefaultRequestLogSize is how many requests the log keeps unless Options say
// otherwise. Bodies are kept whole (Claude Code sends over 100 KB a request),
// so a long-running server forgets the oldest.
const DefaultRequestLogSize = 500

// requestLog keeps the newest requests and wakes waiters whenever one is added
// or changes.
type requestLog struct {
	size int

	mu      sync.Mutex
	entries []Request
	// dropped counts the oldest entries forgotten to stay within size.
	dropped int
	changed chan struct{}
}

func newRequestLog(size int) *requestLog {
	if size <= 0 {
		size = DefaultRequestLogSize
	}
	return &requestLog{size: size, changed: make(chan struct{})}
}

// add logs a new request and returns its sequence number.
func (l *requestLog) add(r Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Seq = l.dropped + len(l.entries) + 1
	l.entries = append(l.entries, r)
	if len(l.entries) > l.size {
		n := len(l.entries) - l.size
		l.entries = append([]Request(nil), l.entries[n:]...)
		l.dropped += n
	}
	l.notifyLocked()
	return r.Seq
}

// update changes the entry seq in place, unless it was already forgotten.
func (l *requestLog) update(seq int, change func(*Request)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := seq - 1 - l.dropped; i >= 0 {
		change(&l.entries[i])
	}
	l.notifyLocked()
}

func (l *requestLog) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.entries...)
}

func (l *requestLog) waitFor(ctx context.Context, match func(Request) bool) (Request, error) {
	for {
		l.mu.Lock()
		for _, r := range l.entries {
			if match(r) {
				l.mu.Unlock()
				return r, nil
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return Request{}, fmt.Errorf("wait for a model request: %w", ctx.Err())
		}
	}
}

// redactedHeader copies h with credential values replaced, keeping only whether
// they were present, so logs never carry a key.
func redactedHeader(h http.Header) http.Header {
	out := h.Clone()
	for name := range out {
		switch strings.ToLower(name) {
		case "authorization", "x-api-key", "x-goog-api-key", "cookie", "proxy-authorization":
			out[name] = []string{"[redacted]"}
		}
	}
	return out
}
