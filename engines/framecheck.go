package engines

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ValidateFrame checks a frame against the chunk schema of ai@7.0.173
// (uiMessageChunkSchema) without running the client: a known type, its required
// members present with the right JSON types (input, output, data and messageMetadata
// present even when null), optional members of the right type when present (null is not
// an absent value), and providerMetadata as a two-level object. The browser stops at the
// first chunk its schema rejects and loses the rest of the response, so the relay can
// use this to keep an adapter's bad frame away from browsers. Unknown extra members are
// accepted, as the client accepts them. The members of citations and steering-message
// parts are only checked to be arrays. Tests check its verdicts against the real client.
func ValidateFrame(f Frame) error {
	typ := f.Type()
	spec, ok := chunkSpecs[typ]
	if !ok {
		if !strings.HasPrefix(typ, "data-") {
			return fmt.Errorf("frame type %q is not a UI message chunk type", typ)
		}
		spec = dataSpec
	}
	var errs []error
	for name, kind := range spec {
		raw, present := f.fields[name]
		if kind.required && !present {
			errs = append(errs, fmt.Errorf("%s: %s is required", typ, name))
			continue
		}
		if present {
			// encoding/json decodes null into anything without error, so null is
			// refused here for every typed member: zod's optional() does not accept it.
			if string(raw) == "null" && !kind.nullable {
				errs = append(errs, fmt.Errorf("%s: %s must not be null", typ, name))
			} else if err := kind.check(raw); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s %w", typ, name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// member describes one chunk member: whether it must be present and how its value is
// checked.
type member struct {
	required bool
	check    func(json.RawMessage) error
	nullable bool
}

func isString(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return errors.New("must be a string")
	}
	return nil
}

func isBool(raw json.RawMessage) error {
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return errors.New("must be a boolean")
	}
	return nil
}

func anyJSON(json.RawMessage) error { return nil }

func isArray(raw json.RawMessage) error {
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil || a == nil {
		return errors.New("must be an array")
	}
	return nil
}

func isObject(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return errors.New("must be an object")
	}
	return nil
}

func isProviderMetadata(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return errors.New("must be an object of provider objects")
	}
	for provider, inner := range m {
		if isObject(inner) != nil {
			return fmt.Errorf("entry %q must be an object", provider)
		}
	}
	return nil
}

func oneOf(values ...string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			for _, v := range values {
				if s == v {
					return nil
				}
			}
		}
		return fmt.Errorf("must be one of %v", values)
	}
}

var (
	reqString   = member{true, isString, false}
	reqPresent  = member{true, anyJSON, true}
	reqBool     = member{true, isBool, false}
	optString   = member{false, isString, false}
	optBool     = member{false, isBool, false}
	optAny      = member{false, anyJSON, true}
	optProvider = member{false, isProviderMetadata, false}
	optObject   = member{false, isObject, false}
)

var dataSpec = map[string]member{"id": optString, "data": reqPresent, "transient": optBool}

// chunkSpecs is the member table of ai@7.0.173's uiMessageChunkSchema. It is a
// read-only lookup table, never written after initialisation.
var chunkSpecs = map[string]map[string]member{
	"text-start":      {"id": reqString, "providerMetadata": optProvider},
	"text-delta":      {"id": reqString, "delta": reqString, "providerMetadata": optProvider},
	"text-end":        {"id": reqString, "citations": {false, isArray, false}, "providerMetadata": optProvider},
	"error":           {"errorText": reqString},
	"reasoning-start": {"id": reqString, "providerMetadata": optProvider},
	"reasoning-delta": {"id": reqString, "delta": reqString, "providerMetadata": optProvider},
	"reasoning-end":   {"id": reqString, "providerMetadata": optProvider},
	"tool-input-start": {"toolCallId": reqString, "toolName": reqString, "inputEncoding": {false, oneOf("json", "text"), false},
		"providerExecuted": optBool, "providerMetadata": optProvider, "toolMetadata": optObject, "dynamic": optBool, "title": optString},
	"tool-input-delta": {"toolCallId": reqString, "inputTextDelta": reqString},
	"tool-input-available": {"toolCallId": reqString, "toolName": reqString, "input": reqPresent, "providerExecuted": optBool,
		"providerMetadata": optProvider, "toolMetadata": optObject, "dynamic": optBool, "title": optString},
	"tool-input-error": {"toolCallId": reqString, "toolName": reqString, "input": reqPresent, "errorText": reqString,
		"providerExecuted": optBool, "providerMetadata": optProvider, "toolMetadata": optObject, "dynamic": optBool, "title": optString},
	"tool-approval-request": {"approvalId": reqString, "toolCallId": reqString, "approvalDescriptor": optAny, "inputSchemaInput": optAny,
		"reason": optString, "isAutomatic": optBool, "signature": optString},
	"tool-approval-response": {"approvalId": reqString, "approved": reqBool, "reason": optString, "providerExecuted": optBool, "providerMetadata": optProvider},
	"tool-output-available": {"toolCallId": reqString, "output": reqPresent, "providerExecuted": optBool, "providerMetadata": optProvider,
		"toolMetadata": optObject, "dynamic": optBool, "preliminary": optBool},
	"tool-output-error": {"toolCallId": reqString, "errorText": reqString, "providerExecuted": optBool, "providerMetadata": optProvider,
		"toolMetadata": optObject, "dynamic": optBool},
	"tool-output-denied": {"toolCallId": reqString},
	"custom":             {"kind": reqString, "providerMetadata": optProvider},
	"source-url":         {"sourceId": reqString, "url": reqString, "title": optString, "providerMetadata": optProvider},
	"source-document": {"sourceId": reqString, "mediaType": reqString, "title": reqString, "filename": optString,
		"providerMetadata": optProvider},
	"file":             {"url": reqString, "mediaType": reqString, "providerMetadata": optProvider},
	"reasoning-file":   {"url": reqString, "mediaType": reqString, "providerMetadata": optProvider},
	"steering-message": {"id": reqString, "parts": {true, isArray, false}},
	"start-step":       {},
	"finish-step":      {},
	"reset-step":       {},
	"start":            {"messageId": optString, "messageMetadata": optAny},
	"finish": {"finishReason": {false, oneOf(string(FinishStop), string(FinishLength), string(FinishContentFilter),
		string(FinishToolCalls), string(FinishError), string(FinishInterrupted), string(FinishOther)), false}, "messageMetadata": optAny},
	"abort":            {"reason": optString},
	"message-metadata": {"messageMetadata": reqPresent},
}
