// Package pi is the engine adapter for Pi (@mariozechner/pi-coding-agent), driven
// over `pi --mode rpc`: strict LF-delimited JSON commands on the process's stdin,
// responses and events on its stdout. The adapter starts Pi as one of the box's
// process sessions with PI_CODING_AGENT_DIR in the conversation's home, a models.json
// whose provider is the box's model forward, the session file at a path the platform
// chooses (--session) and the platform's approval extension (-e); the runtime client
// writes commands to its stdin and translates the journal of its stdout into the
// engine contract's events. The session JSONL Pi keeps is the durable record inputs
// are admitted by, and the session log the platform mirrors and restores into a
// replacement box.
package pi
