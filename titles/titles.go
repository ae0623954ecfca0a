// Package titles writes automatic Session titles through the deployment's model
// service (the Anthropic Messages API; in `astrabox dev` without credentials, the
// scripted model server). It owns the request and the shaping of the answer into one
// title line; when a title is asked for and whether it may be stored are the
// caller's (activities, store.SetAutoTitle).
package titles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest title, in characters (the Session title's limit).
const MaxLen = 200

// excerptLen bounds each piece of the conversation sent to the model service.
const excerptLen = 2000

// Config says which model service and model write titles.
type Config struct {
	// BaseURL is the model service's base URL (the Anthropic Messages API's host).
	BaseURL string
	// APIKey is the credential sent as x-api-key.
	APIKey string
	// Model is the model asked for a title.
	Model string
	// HTTP is the client used; nil uses one with no timeout (callers bound ctx).
	HTTP *http.Client
}

// Generator asks the model service for titles.
type Generator struct {
	cfg Config
}

// New returns a Generator; BaseURL and Model are required.
func New(cfg Config) (*Generator, error) {
	if cfg.BaseURL == "" || cfg.Model == "" {
		return nil, errors.New("titles: a model service base URL and a model are required")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Generator{cfg: cfg}, nil
}

// Conversation is what a title is written from: the person's first message and the
// text of the response that answered it.
type Conversation struct {
	Message string
	Reply   string
}

// instruction is the system prompt of a title request.
const instruction = "You name conversations. Answer with a short title for the conversation below: " +
	"one line, at most eight words, no quotes, no trailing punctuation, nothing else."

// Title asks the model service for a title of c and returns it as one line of at most
// MaxLen characters.
func (g *Generator) Title(ctx context.Context, c Conversation) (string, error) {
	// The person's message comes last: it is what the conversation is about.
	prompt := "The assistant replied:\n" + excerpt(c.Reply) + "\n\nThe conversation began with this message:\n" + excerpt(c.Message)
	body, err := json.Marshal(map[string]any{
		"model":      g.cfg.Model,
		"max_tokens": 64,
		"system":     instruction,
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
	})
	if err != nil {
		return "", fmt.Errorf("encode title request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.BaseURL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("title request: %w", err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", g.cfg.APIKey)
	resp, err := g.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask the model service for a title: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read the title answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the model service answered a title request with HTTP %d", resp.StatusCode)
	}
	var answer struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return "", fmt.Errorf("decode the title answer: %w", err)
	}
	var text strings.Builder
	for _, b := range answer.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	title := Line(text.String())
	if title == "" {
		return "", errors.New("the model service answered a title request with no text")
	}
	return title, nil
}

// Line shapes a model's answer into a title: its first non-blank line, runs of
// whitespace as one space, surrounding quotes and a trailing period dropped, cut to
// MaxLen characters.
func Line(answer string) string {
	var line string
	for _, l := range strings.Split(answer, "\n") {
		if line = strings.Join(strings.Fields(l), " "); line != "" {
			break
		}
	}
	line = strings.Trim(line, "\"'`“”")
	line = strings.TrimSuffix(line, ".")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) > MaxLen {
		line = strings.TrimSpace(string([]rune(line)[:MaxLen]))
	}
	return line
}

// excerpt bounds one piece of the conversation.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > excerptLen {
		return string([]rune(s)[:excerptLen])
	}
	return s
}
