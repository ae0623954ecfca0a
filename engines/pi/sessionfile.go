package pi

import (
	"encoding/json"

	"github.com/astrabox/astrabox/engines"
)

// SessionPattern is where the platform has Pi keep a conversation's session file,
// relative to PI_CODING_AGENT_DIR: the platform names the file after the engine
// session key it chose and passes the path with --session, so a restored file is
// found at the same place.
const SessionPattern = "sessions/" + engines.SessionLogKeyPlaceholder + ".jsonl"

// userMessageInput reads the input id of a session-file line that records a user
// message: {"type":"message",…,"message":{"role":"user",…,"astraboxInputId":…}}. The
// platform extension records the id on each user message Pi delivers, in the file as
// in Pi's event. Pi writes a new session's header and first user message only when the
// first assistant message ends; after that every message is appended at its
// message_end (engines.FileAdmissions indexes the file).
func userMessageInput(l []byte) []string {
	var e struct {
		Type    string `json:"type"`
		Message struct {
			Role    string `json:"role"`
			InputID string `json:"astraboxInputId"`
		} `json:"message"`
	}
	if json.Unmarshal(l, &e) != nil || e.Type != "message" || e.Message.Role != roleUser {
		return nil
	}
	return []string{e.Message.InputID}
}
