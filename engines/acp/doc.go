// Package acp drives any Agent program that speaks the Agent Client Protocol (ACP,
// version 1) over stdin and stdout: one adapter, configured by a Profile per program
// (command, environment, state folder, permission modes in the program's own ids,
// how it treats a prompt sent while busy, where it records admitted input).
//
// The program runs in the box under `astrabox-runner stdin-echo`, which writes every
// line the client sends into the program's stdout journal before the program reads
// it. The journal therefore holds both directions in order, and the translation of
// a journal line depends only on the lines before it: a cursor is a journal offset
// plus the translation state, and any reader resuming there yields the same events.
// The wire types are those of github.com/coder/acp-go-sdk; its connection is not used,
// because it consumes the stream once and drops what it does not know, while a reader
// here re-translates the raw journal from any cursor.
package acp
