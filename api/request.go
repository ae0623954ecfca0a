package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// maxImportBodyBytes caps a history import, an administrator's bulk upload of earlier
// messages; other bodies follow http.max_body_bytes, messages http.max_input_bytes.
const maxImportBodyBytes = 32 << 20

// decodeBody decodes the request's JSON body into dst strictly: one JSON object, no
// unknown field, no trailing data, at most limit bytes. Every refusal is 400
// INVALID_REQUEST naming the field. allowEmpty accepts an absent body as {}.
func decodeBody(c *gin.Context, limit int64, dst any, allowEmpty bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Message: fmt.Sprintf("body: is larger than %d bytes", limit)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &Error{Status: http.StatusRequestTimeout, Code: CodeInvalidRequest, Message: "body: was not received within the server's read timeout", Err: err}
		}
		return InvalidRequest("body", "could not be read: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil
		}
		return InvalidRequest("body", "a JSON object is required")
	}
	return decodeStrict(body, dst, "")
}

// decodeStrict decodes one JSON object into dst, refusing unknown fields and trailing
// data; field errors are prefixed with prefix (e.g. "config.").
func decodeStrict(data []byte, dst any, prefix string) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			name = "body"
		}
		return InvalidRequest(name, "must be a JSON object")
	}
	if err := checkJSONText(trimmed, prefix); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonFieldError(err, prefix)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return InvalidRequest("body", "has data after the JSON object")
	}
	return nil
}

// jsonFieldError turns a decoding error into a 400 naming the field.
func jsonFieldError(err error, prefix string) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return InvalidRequest("body", "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return InvalidRequest(prefix+field, "must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return InvalidRequest("body", "the JSON ends early")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return InvalidRequest(prefix+strings.Trim(name, `"`), "is not a known field")
	}
	var fieldErr *Error
	if errors.As(err, &fieldErr) {
		return fieldErr
	}
	return InvalidRequest("body", "is not valid: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "uint", "uint64", "float64":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "another type"
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(c *gin.Context, name string, def, min, max int64) (int64, error) {
	raw, ok := c.GetQuery(name)
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, InvalidRequest(name, "must be an integer, not %q", raw)
	}
	if v < min || v > max {
		return 0, InvalidRequest(name, "must be between %d and %d", min, max)
	}
	return v, nil
}

// queryBool parses an optional boolean query parameter.
func queryBool(c *gin.Context, name string) (bool, error) {
	raw, ok := c.GetQuery(name)
	if !ok {
		return false, nil
	}
	v, err := strconv.ParseBool(raw)
	if err != nil {
		return false, InvalidRequest(name, "must be true or false, not %q", raw)
	}
	return v, nil
}

// knownQuery refuses query parameters the route does not take.
func knownQuery(c *gin.Context, names ...string) error {
	for key := range c.Request.URL.Query() {
		known := false
		for _, n := range names {
			known = known || key == n
		}
		if !known {
			return InvalidRequest(key, "is not a known query parameter")
		}
	}
	return nil
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// requiredString refuses an absent or blank string field.
func requiredString(field string, v *string) error {
	if v == nil || strings.TrimSpace(*v) == "" {
		return InvalidRequest(field, "is required")
	}
	return nil
}

func fmtList(items []string) string { return fmt.Sprintf("%v", items) }
