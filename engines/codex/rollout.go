package codex

import (
	"encoding/json"

	"github.com/astrabox/astrabox/engines"
)

// RolloutPattern is where Codex keeps a thread's rollout, relative to CODEX_HOME, as a
// session-log pattern: sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl. The
// date and time are Codex's at the thread's start, so the platform resolves them
// against the box's files; a restored rollout goes back to the same relative path,
// where thread/resume finds it by the thread id.
const RolloutPattern = "sessions/*/*/*/rollout-*-" + engines.SessionLogKeyPlaceholder + ".jsonl"

// admittedClientID returns the client id (one) of a rollout line that records a user message:
// {"type":"event_msg","payload":{"type":"item_completed","item":{"type":
// "UserMessage","client_id":…}}}. Codex writes it, with the response_item, before it
// asks the model (engines.FileAdmissions indexes the rollout).
func admittedClientID(line []byte) []string {
	var e struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
			Item struct {
				Type     string `json:"type"`
				ClientID string `json:"client_id"`
			} `json:"item"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "event_msg" || e.Payload.Type != "item_completed" ||
		e.Payload.Item.Type != "UserMessage" {
		return nil
	}
	return []string{e.Payload.Item.ClientID}
}
