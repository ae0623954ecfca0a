package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// domainErrors maps the store's sentinels and the engine registry's validation errors
// onto the envelope. The server always consults it after the mappers it was given.
func domainErrors(err error) (*Error, bool) {
	var invalid *engines.ValidationError
	switch {
	case errors.As(err, &invalid):
		msgs := make([]string, len(invalid.Problems))
		for i, p := range invalid.Problems {
			msgs[i] = p.Field + ": " + p.Message
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: strings.Join(msgs, "; "),
			Data: map[string]any{"problems": invalid.Problems}}, true
	case errors.Is(err, store.ErrNotFound):
		return NotFound("resource"), true
	case errors.Is(err, store.ErrVersionConflict):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the resource was changed by someone else; reload it and retry with its current version"}, true
	case errors.Is(err, store.ErrDuplicate):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "a resource with this name already exists"}, true
	case errors.Is(err, store.ErrSessionBusy):
		return &Error{Status: http.StatusConflict, Code: CodeSessionBusy, Message: "the Agent program is working; interrupt the work first or wait for it to finish"}, true
	case errors.Is(err, store.ErrInteractionNotOpen):
		return &Error{Status: http.StatusConflict, Code: CodeInteractionNotOpen, Message: "the interaction was already answered, withdrawn or expired"}, true
	case errors.Is(err, store.ErrHistoryImportAfterConversation):
		return &Error{Status: http.StatusConflict, Code: CodeHistoryImportAfterConversation, Message: "the conversation has started; history cannot be placed before its messages"}, true
	case errors.Is(err, store.ErrHistoryImportConflict):
		return &Error{Status: http.StatusConflict, Code: CodeHistoryImportConflict, Message: "the import does not continue the recorded one: send the messages already imported first, unchanged, then the new ones"}, true
	case errors.Is(err, store.ErrNoSecretsKey):
		return Unavailable("secret values cannot be stored or read: the server has no secrets.key configured", nil), true
	case errors.Is(err, store.ErrWrongLifecycle):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the Session's lifecycle does not allow this operation"}, true
	}
	return nil, false
}
