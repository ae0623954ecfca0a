package acp

import (
	"bytes"
	"encoding/json"
)

// ACP version 1 methods this package sends or reads.
const (
	methodInitialize        = "initialize"
	methodSessionNew        = "session/new"
	methodSessionLoad       = "session/load"
	methodSessionResume     = "session/resume"
	methodSessionPrompt     = "session/prompt"
	methodSessionCancel     = "session/cancel"
	methodSessionSetMode    = "session/set_mode"
	methodSessionUpdate     = "session/update"
	methodRequestPermission = "session/request_permission"
	methodCancelRequest     = "$/cancel_request"
)

// protocolVersion is the ACP version the client speaks.
const protocolVersion = 1

// sentKey wraps, in the journal, a line the client sent (astrabox-runner stdin-echo).
const sentKey = "astrabox_sent"

// Request id prefixes of the client's requests: the rest names what the request is
// about, so a reply read from the journal says what it answers.
const (
	idPrefixPrompt = "prompt:"
	idPrefixMode   = "mode:"
	idHandshake    = "handshake:"
)

// rpcLine is one JSON-RPC message: a reply (id and result or error), a request
// (id and method) or a notification (method only).
type rpcLine struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (l rpcLine) isReply() bool   { return len(l.ID) > 0 && l.Method == "" }
func (l rpcLine) isRequest() bool { return len(l.ID) > 0 && l.Method != "" }

// idString returns a string id, or "" when the id is a number.
func (l rpcLine) idString() string {
	var s string
	if json.Unmarshal(l.ID, &s) != nil {
		return ""
	}
	return s
}

// journalLine is one stdout line of the journal: what the program printed, or what the
// client sent it (wrapped by stdin-echo).
type journalLine struct {
	sent bool
	msg  rpcLine
}

// parseJournalLine reads a stdout line; ok is false for a line that is no JSON-RPC.
func parseJournalLine(data []byte) (journalLine, bool) {
	data = bytes.TrimSpace(data)
	if bytes.HasPrefix(data, []byte(`{"`+sentKey+`":`)) {
		var w map[string]json.RawMessage
		if json.Unmarshal(data, &w) == nil {
			var l rpcLine
			if json.Unmarshal(w[sentKey], &l) == nil {
				return journalLine{sent: true, msg: l}, true
			}
		}
		return journalLine{}, false
	}
	var l rpcLine
	if json.Unmarshal(data, &l) != nil || (l.Method == "" && len(l.ID) == 0) {
		return journalLine{}, false
	}
	return journalLine{msg: l}, true
}

// request encodes a client request.
func request(id, method string, params any) []byte {
	raw, _ := json.Marshal(params)
	idRaw, _ := json.Marshal(id)
	line, _ := json.Marshal(rpcLine{JSONRPC: "2.0", ID: idRaw, Method: method, Params: raw})
	return append(line, '\n')
}

// notification encodes a client notification.
func notification(method string, params any) []byte {
	raw, _ := json.Marshal(params)
	line, _ := json.Marshal(rpcLine{JSONRPC: "2.0", Method: method, Params: raw})
	return append(line, '\n')
}

// reply encodes the client's reply to a program's request.
func reply(id json.RawMessage, result any) []byte {
	raw, _ := json.Marshal(result)
	line, _ := json.Marshal(rpcLine{JSONRPC: "2.0", ID: id, Result: raw})
	return append(line, '\n')
}

// replyError encodes the client's error reply to a program's request.
func replyError(id json.RawMessage, code int, message string) []byte {
	line, _ := json.Marshal(rpcLine{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: message}})
	return append(line, '\n')
}

// codeMethodNotFound is JSON-RPC's "method not found".
const codeMethodNotFound = -32601
