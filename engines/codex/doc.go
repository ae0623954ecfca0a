// Package codex is the engine adapter for the Codex CLI, driven over `codex
// app-server`: JSON-RPC 2.0 (without the "jsonrpc" field) as newline-delimited JSON on
// the process's stdin and stdout. The adapter starts the app-server as one of the box's
// process sessions with CODEX_HOME in the conversation's home; the runtime client
// writes requests and answers to its stdin and translates the journal of its stdout
// into the engine contract's events; the rollout JSONL Codex keeps of the thread is the
// durable record inputs are admitted by, and the session log the platform mirrors and
// restores into a replacement box.
package codex
