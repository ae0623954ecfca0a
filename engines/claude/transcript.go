package claude

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"unicode"
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
