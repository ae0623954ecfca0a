package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/astrabox/astrabox/engines"
)

// TranscriptPath is where Claude Code keeps a conversation's transcript:
// $CLAUDE_CONFIG_DIR/projects/<slug of the working directory>/<session id>.jsonl, the
// slug being the directory with every character other than a letter or digit replaced
// by "-".
func TranscriptPath(configDir, workDir, sessionID string) string {
	slug := strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '-'
	}, workDir)
	return path.Join(configDir, "projects", slug, sessionID+".jsonl")
}

// TranscriptEntry is one JSON entry of Claude's transcript and its index (0-based line
// number). The platform mirrors entries in order without interpreting them.
type TranscriptEntry struct {
	Index int             `json:"index"`
	Entry json.RawMessage `json:"entry"`
}

// TranscriptMirror is the store side of the transcript mirror, implemented by the
// orchestration on the database: Append saves entries (idempotent by index, in order)
// and Load returns every saved entry of a conversation in order, for RestoreTranscript.
type TranscriptMirror interface {
	AppendTranscript(ctx context.Context, claudeSessionID string, entries []TranscriptEntry) error
	LoadTranscript(ctx context.Context, claudeSessionID string) ([]TranscriptEntry, error)
}

// TranscriptEntries reads the conversation's transcript entries from index from on:
// what the orchestration mirrors into its store while the conversation runs.
func (c *Client) TranscriptEntries(ctx context.Context, from int) ([]TranscriptEntry, error) {
	return ReadTranscript(ctx, c.box, c.identity, c.transcript, from)
}

// TranscriptPath is the path of the conversation's transcript in the box.
func (c *Client) TranscriptPath() string { return c.transcript }

// MirrorTranscript appends the entries from index from on to the mirror and returns
// the index to continue from. Call it after responses end and before the box is
// released; entries keep their indexes, so a repeated call after a lost reply is safe.
func MirrorTranscript(ctx context.Context, c *Client, mirror TranscriptMirror, from int) (int, error) {
	entries, err := c.TranscriptEntries(ctx, from)
	if err != nil {
		return from, err
	}
	if len(entries) == 0 {
		return from, nil
	}
	if err := mirror.AppendTranscript(ctx, c.EngineSessionKey(), entries); err != nil {
		return from, fmt.Errorf("mirror claude transcript: %w", err)
	}
	return entries[len(entries)-1].Index + 1, nil
}

// ReadTranscript reads the complete entries of a transcript from index from on, through
// the box. A line Claude is still writing (no newline yet) is left for the next read.
func ReadTranscript(ctx context.Context, box engines.Box, identity *engines.RuntimeIdentity, transcriptPath string, from int) ([]TranscriptEntry, error) {
	data, err := box.ReadFile(ctx, identity, transcriptPath)
	if err != nil {
		return nil, fmt.Errorf("read claude transcript: %w", err)
	}
	var out []TranscriptEntry
	for i, line := range completeLines(data) {
		if i < from || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, fmt.Errorf("claude transcript line %d is not JSON", i)
		}
		out = append(out, TranscriptEntry{Index: i, Entry: json.RawMessage(bytes.Clone(line))})
	}
	return out, nil
}

func completeLines(data []byte) [][]byte {
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	return bytes.Split(data[:end], []byte{'\n'})
}

// RestoreTranscript writes mirrored entries back, in order, as the transcript of a
// replacement box before Claude Code is started with --resume. Entries must be the
// complete conversation from index 0 without gaps: a partial transcript would resume a
// different conversation than the one the Session saw. No entries write nothing: a
// conversation Claude never wrote has no transcript, and whether it may start afresh
// is the adapter's decision from EngineStartupContext.ConversationEmpty.
func RestoreTranscript(ctx context.Context, box engines.Box, identity *engines.RuntimeIdentity, transcriptPath string, entries []TranscriptEntry) error {
	if len(entries) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for i, e := range entries {
		if e.Index != i {
			return fmt.Errorf("restore claude transcript: entry %d has index %d", i, e.Index)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, e.Entry); err != nil {
			return fmt.Errorf("restore claude transcript: entry %d: %w", i, err)
		}
		buf.Write(compact.Bytes())
		buf.WriteByte('\n')
	}
	if err := box.WriteFile(ctx, identity, transcriptPath, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("restore claude transcript: %w", err)
	}
	return nil
}

// admittedUUIDs returns the input uuids a transcript line makes durable (a user line
// with the uuid or naming it in mergedSendUuids, or the queued_command attachment
// through which Claude absorbed the input into a running turn), in the order
// the inputs were sent. Claude 2.1.328 merges prompts that waited in its queue into one
// user line: its uuid is the last input's, and mergedSendUuids names the others in send
// order (recordings parallel_prompts*). Their queue-operation dequeue lines carry no
// uuid, and an input with only its enqueue on disk is lost if the process dies, so the
// user line is the record that makes each of them durable.
func admittedUUIDs(line []byte) []string {
	var e struct {
		Type            string   `json:"type"`
		UUID            string   `json:"uuid"`
		IsMeta          bool     `json:"isMeta"`
		MergedSendUUIDs []string `json:"mergedSendUuids"`
		Attachment      *struct {
			Type       string `json:"type"`
			SourceUUID string `json:"source_uuid"`
		} `json:"attachment"`
	}
	if json.Unmarshal(line, &e) != nil {
		return nil
	}
	switch {
	case e.Type == "user" && !e.IsMeta:
		return append(slices.Clone(e.MergedSendUUIDs), e.UUID)
	case e.Type == "attachment" && e.Attachment != nil && e.Attachment.Type == "queued_command":
		return []string{e.Attachment.SourceUUID}
	}
	return nil
}
