package pubsub

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Channel names are per Session, so PostgreSQL routes a notification only to the
// listeners of that Session: "session_output:<uuid>" is 51 bytes, within the 63-byte
// identifier limit. An output payload is an OutputNotice.
const (
	sessionOutputPrefix = "session_output:"
	sessionInputsPrefix = "session_inputs:"
)

// CredentialsRevokedChannel announces that an API token or a share link was revoked, or
// a user disabled, so open streams re-check their credential at once rather than at
// their next periodic re-check. The payload is empty: every stream re-reads its own.
const CredentialsRevokedChannel = "credentials_revoked"

// MaxChannelLen is PostgreSQL's limit on a channel name (NAMEDATALEN - 1).
const MaxChannelLen = 63

// SessionOutputChannel is the channel announcing new output parts of a Session; its
// payload is an OutputNotice.
func SessionOutputChannel(sessionID string) string { return sessionOutputPrefix + sessionID }

// SessionInputsChannel is the channel announcing newly accepted inputs of a Session,
// which wakes its reader; the payload is an InputNotice.
func SessionInputsChannel(sessionID string) string { return sessionInputsPrefix + sessionID }

// InputNotice is what a SessionInputsChannel notification says: the accepted input's
// seq and id and, when it fits in a notification (MaxNoticeContent) and the Session
// is neither archived nor deleted, its content, so the Session's Relay can hand it to
// the runtime without reading it back. Its payload
// is the decimal seq, a space and the id, then a space and the content as stored
// when it is carried.
type InputNotice struct {
	Seq int64
	ID  string
	// Content is the input's content when Carried.
	Content string
	Carried bool
}

// MaxNoticeContent bounds the content, in bytes, an input notification carries:
// PostgreSQL refuses a payload of 8000 bytes or more, and the seq and id go before it.
const MaxNoticeContent = 7900

// ParseInputNotice parses a SessionInputsChannel payload. The content is taken as it
// is, spaces and all.
func ParseInputNotice(payload string) (InputNotice, error) {
	seqText, rest, _ := strings.Cut(payload, " ")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 1 {
		return InputNotice{}, fmt.Errorf("parse input notification %q: no seq", truncated(payload))
	}
	id, content, carried := strings.Cut(rest, " ")
	if id == "" {
		return InputNotice{}, fmt.Errorf("parse input notification %q: no input id", truncated(payload))
	}
	return InputNotice{Seq: seq, ID: id, Content: content, Carried: carried}, nil
}

// truncated is the start of a payload, for an error message.
func truncated(payload string) string {
	const keep = 80
	if len(payload) <= keep {
		return payload
	}
	return payload[:keep] + "..."
}

// OutputNotice is what a SessionOutputChannel notification says: the seq of the
// newest committed part and, when they fit in a notification (MaxNoticeFrames), the
// frames of the parts the commit wrote, as PostgreSQL stored them
// (jsonb's text, so a stream sends the same bytes as from a read of the log): the
// parts at seqs Seq-len(Frames)+1 to Seq. Its payload is the decimal seq, then a
// space and the frames as a JSON array when there are any.
type OutputNotice struct {
	Seq    int64
	Frames []json.RawMessage
	// derived is what its readers made of the notice (Derived), shared by every
	// subscriber one notification reached; nil in a notice parsed on its own.
	derived *derivedNotice
}

type derivedNotice struct {
	once  sync.Once
	value any
}

// FirstSeq is the seq of the first part the notice carries (Seq+1 when none).
func (n OutputNotice) FirstSeq() int64 { return n.Seq - int64(len(n.Frames)) + 1 }

// Derived returns derive(n), made once for all the subscribers one notification
// reached: the first to ask makes it, the others wait for it and share it. Each of a
// Session's streams in a process sends the parts a notification carries, encoded
// alike; on a busy machine they wake one after another, so sharing by time missed
// most of them. The notice keeps one derived value, so every caller must derive the
// same thing from it. A notice parsed on its own (ParseOutputNotice) derives at each
// call.
func (n OutputNotice) Derived(derive func(OutputNotice) any) any {
	if n.derived == nil {
		return derive(n)
	}
	n.derived.once.Do(func() { n.derived.value = derive(n) })
	return n.derived.value
}

// MaxNoticeFrames bounds the frames' text a notification carries: PostgreSQL refuses
// a payload of 8000 bytes or more, and the seq goes before it.
const MaxNoticeFrames = 7900

// ParseOutputNotice parses a SessionOutputChannel payload.
func ParseOutputNotice(payload string) (OutputNotice, error) {
	seqText, frames, _ := strings.Cut(strings.TrimSpace(payload), " ")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return OutputNotice{}, fmt.Errorf("parse output notification %q: %w", payload, err)
	}
	n := OutputNotice{Seq: seq}
	if frames != "" {
		if err := json.Unmarshal([]byte(frames), &n.Frames); err != nil {
			return OutputNotice{}, fmt.Errorf("parse output notification's frames: %w", err)
		}
	}
	return n, nil
}

func validChannel(name string) error {
	if name == "" || len(name) > MaxChannelLen {
		return fmt.Errorf("channel name %q must be 1 to %d bytes", name, MaxChannelLen)
	}
	return nil
}
