package pi

import _ "embed"

// ApprovalExtension is the platform's Pi extension (extension/astrabox-approval.ts):
// it asks for approval of bash, edit and write through Pi's extension UI request,
// honours Pi's abort signal, and reports each outcome as a status line; it also records
// each input's id on the user message Pi delivers (see InputMarker). The adapter writes
// it into the box and loads it with -e.
//
//go:embed extension/astrabox-approval.ts
var ApprovalExtension []byte

// ApprovalExtensionName is the extension's file name in the box.
const ApprovalExtensionName = "astrabox-approval.ts"

// Permission modes, in the vocabulary of the platform's Pi extension: Pi itself has
// none.
const (
	// ModeAsk asks before bash, edit and write run.
	ModeAsk = "ask"
	// ModeAllowAll never asks.
	ModeAllowAll = "allow-all"
)

// PermissionModes are the extension's modes; ModeAsk is the default.
var PermissionModes = []string{ModeAsk, ModeAllowAll}

// PermissionModeEnv starts the extension in a mode; the command
// PermissionModeCommand changes it while Pi runs.
const (
	PermissionModeEnv     = "ASTRABOX_PI_PERMISSION_MODE"
	PermissionModeCommand = "/astrabox-permission-mode"
)

// approvalStatusKey is the status key the extension reports outcomes under.
const approvalStatusKey = "astrabox-approval"

// The input id marker: a prompt's text starts with it, the extension takes it off and
// records the id on the user message Pi delivers (inputIDField), in Pi's event and in
// the session file. U+2063 (invisible separator) keeps it apart from any text a person
// types.
const (
	inputMarkOpen  = "\u2063astrabox-input:"
	inputMarkClose = "\u2063"
	inputIDField   = "astraboxInputId"
)

// InputMarker is the prefix of the prompt text that carries an input id to the
// extension.
func InputMarker(inputID string) string { return inputMarkOpen + inputID + inputMarkClose }
