package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Error codes of the product's envelope. The code is what integrations switch
// on; the message is for people.
const (
	CodeOK                        = "OK"
	CodeInvalidRequest            = "INVALID_REQUEST"
	CodeUnauthorized              = "UNAUTHORIZED"
	CodeForbidden                 = "FORBIDDEN"
	CodeNotFound                  = "NOT_FOUND"
	CodeConflict                  = "CONFLICT"
	CodeAgentRuntimeError         = "AGENT_RUNTIME_ERROR"
	CodeSessionBusy               = "SESSION_BUSY"
	CodeInteractionNotOpen        = "INTERACTION_NOT_OPEN"
	CodePendingInputsNotCancelled = "PENDING_INPUTS_NOT_CANCELLED"
	CodeAdmissionDenied           = "ADMISSION_DENIED"
	CodePayloadTooLarge           = "PAYLOAD_TOO_LARGE"
	CodeServiceUnavailable        = "SERVICE_UNAVAILABLE"
	// CodeHistoryImportAfterConversation refuses an import once the Session has a
	// message of its own.
	CodeHistoryImportAfterConversation = "HISTORY_IMPORT_AFTER_CONVERSATION"
	// CodeHistoryImportConflict refuses an import that does not continue the recorded one.
	CodeHistoryImportConflict = "HISTORY_IMPORT_CONFLICT"
	// CodePermissionModeRefused: the Agent program refused the permission mode; the
	// Session keeps the mode it had.
	CodePermissionModeRefused = "PERMISSION_MODE_REFUSED"
	CodeInternal              = "INTERNAL_ERROR"
)

// Error is the one error type handlers return to the client. The mapper writes
// it as the envelope {code, message, data} with Status. Err, when set, is the
// cause kept for logs; it is never shown to the client.
type Error struct {
	Status  int
	Code    string
	Message string
	Data    any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// InvalidRequest refuses a request whose field is malformed; the message names
// the field.
func InvalidRequest(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: msg}
}

// NotFound reports that the named thing does not exist or is not the caller's.
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// Unauthorized reports a missing or unknown bearer token.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: msg}
}

// Unavailable reports that a dependency the request needs is down.
func Unavailable(msg string, data any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavailable, Message: msg, Data: data}
}

// ErrorMapper turns domain errors (store sentinels, engine refusals) into an
// *Error. Packages that own such errors register one with the server so the
// mapping stays in one place per domain while the writer stays single.
type ErrorMapper func(error) (*Error, bool)

// toAPIError is the single error-to-HTTP mapping: an *Error passes through,
// registered mappers translate domain errors, a cancelled request is reported as
// such, and anything else is an internal error whose detail stays in the logs.
func toAPIError(err error, mappers []ErrorMapper) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	for _, m := range mappers {
		if mapped, ok := m(err); ok {
			if mapped.Err == nil {
				mapped.Err = err
			}
			return mapped
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavailable, Message: "the request timed out", Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Err: err}
}
