package pubsub

import (
	"fmt"
	"strconv"
	"strings"
)

// Channel names are per Session, so PostgreSQL routes a notification only to the
// listeners of that Session: "session_output:<uuid>" is 51 bytes, within the 63-byte
// identifier limit. The payload is the decimal seq of the last part committed.
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
// payload is the seq of the newest committed part (see OutputSeq).
func SessionOutputChannel(sessionID string) string { return sessionOutputPrefix + sessionID }

// SessionInputsChannel is the channel announcing newly accepted inputs of a Session,
// which wakes its reader; the payload is the input's id.
func SessionInputsChannel(sessionID string) string { return sessionInputsPrefix + sessionID }

// OutputSeq parses a SessionOutputChannel payload.
func OutputSeq(payload string) (int64, error) {
	seq, err := strconv.ParseInt(strings.TrimSpace(payload), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse output notification %q: %w", payload, err)
	}
	return seq, nil
}

func validChannel(name string) error {
	if name == "" || len(name) > MaxChannelLen {
		return fmt.Errorf("channel name %q must be 1 to %d bytes", name, MaxChannelLen)
	}
	return nil
}
