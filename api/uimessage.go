package api

import (
	"encoding/json"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// uiMessage is an AI SDK UI message as history returns it.
type uiMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata map[string]any   `json:"metadata"`
	Parts    []map[string]any `json:"parts"`
}

// assembler builds one UI message from its stream chunks the way the browser's AI SDK
// does (processUIMessageStream in ai@7), so recorded history and a live stream read the
// same. Chunks the SDK keeps out of a message (transient data, errors, steps' ends)
// leave no part.
type assembler struct {
	msg   uiMessage
	texts map[string]int // text and reasoning part index by chunk id
	tools map[string]int // tool part index by toolCallId
	data  map[string]int // data part index by type + id
	raw   map[string]string
}

func newAssembler(id, role string) *assembler {
	return &assembler{
		msg:   uiMessage{ID: id, Role: role, Metadata: map[string]any{}, Parts: []map[string]any{}},
		texts: map[string]int{}, tools: map[string]int{}, data: map[string]int{}, raw: map[string]string{},
	}
}

func fieldAny(f engines.Frame, key string) (any, bool) {
	raw, ok := f.Field(key)
	if !ok {
		return nil, false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}

func (a *assembler) mergeMetadata(f engines.Frame, key string) {
	v, ok := fieldAny(f, key)
	if m, isMap := v.(map[string]any); ok && isMap {
		mergeObjects(a.msg.Metadata, m)
	}
}

func mergeObjects(dst, src map[string]any) {
	for k, v := range src {
		if sub, ok := v.(map[string]any); ok {
			if have, ok := dst[k].(map[string]any); ok {
				mergeObjects(have, sub)
				continue
			}
		}
		dst[k] = v
	}
}

func (a *assembler) push(p map[string]any) int {
	a.msg.Parts = append(a.msg.Parts, p)
	return len(a.msg.Parts) - 1
}

func (a *assembler) copyFields(f engines.Frame, p map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := fieldAny(f, k); ok {
			p[k] = v
		}
	}
}

// add applies one chunk.
func (a *assembler) add(f engines.Frame) {
	typ := f.Type()
	switch typ {
	case "start":
		a.mergeMetadata(f, "messageMetadata")
	case "finish", "message-metadata":
		a.mergeMetadata(f, "messageMetadata")
	case "error":
		// The SDK reports an error chunk without storing it; history keeps the failure
		// notice with the message so it stays visible outside any fold.
		a.msg.Metadata["error_text"] = f.StringField("errorText")
	case "start-step":
		a.push(map[string]any{"type": "step-start"})
	case "text-start", "reasoning-start":
		kind := strings.TrimSuffix(typ, "-start")
		p := map[string]any{"type": kind, "text": "", "state": "streaming"}
		if kind == "reasoning" {
			// The SDK keeps a reasoning part's id, not a text part's.
			p["id"] = f.StringField("id")
		}
		a.copyFields(f, p, "providerMetadata")
		a.texts[kind+"/"+f.StringField("id")] = a.push(p)
	case "text-delta", "reasoning-delta":
		if i, ok := a.texts[strings.TrimSuffix(typ, "-delta")+"/"+f.StringField("id")]; ok {
			a.msg.Parts[i]["text"] = a.msg.Parts[i]["text"].(string) + f.StringField("delta")
		}
	case "text-end", "reasoning-end":
		if i, ok := a.texts[strings.TrimSuffix(typ, "-end")+"/"+f.StringField("id")]; ok {
			a.msg.Parts[i]["state"] = "done"
		}
	case "tool-input-start", "tool-input-available", "tool-input-error":
		a.toolInput(f)
	case "tool-input-delta":
		id := f.StringField("toolCallId")
		a.raw[id] += f.StringField("inputTextDelta")
		if i, ok := a.tools[id]; ok {
			var partial any
			if json.Unmarshal([]byte(a.raw[id]), &partial) == nil {
				a.msg.Parts[i]["input"] = partial
			}
		}
	default:
		a.addOther(f, typ)
	}
}

func (a *assembler) toolInput(f engines.Frame) {
	id := f.StringField("toolCallId")
	i, ok := a.tools[id]
	if !ok {
		p := map[string]any{"toolCallId": id}
		if dyn, _ := fieldAny(f, "dynamic"); dyn == true {
			p["type"], p["toolName"] = "dynamic-tool", f.StringField("toolName")
		} else {
			p["type"] = "tool-" + f.StringField("toolName")
		}
		i = a.push(p)
		a.tools[id] = i
	}
	p := a.msg.Parts[i]
	a.copyFields(f, p, "title", "providerExecuted", "toolMetadata")
	switch f.Type() {
	case "tool-input-start":
		p["state"] = "input-streaming"
	case "tool-input-available":
		p["state"] = "input-available"
		a.copyFields(f, p, "input")
	case "tool-input-error":
		p["state"] = "output-error"
		a.copyFields(f, p, "input", "errorText")
	}
}

func (a *assembler) addOther(f engines.Frame, typ string) {
	tool := func() map[string]any {
		if i, ok := a.tools[f.StringField("toolCallId")]; ok {
			return a.msg.Parts[i]
		}
		return nil
	}
	switch typ {
	case "tool-approval-request":
		if p := tool(); p != nil {
			p["state"] = "approval-requested"
			p["approval"] = map[string]any{"id": f.StringField("approvalId")}
		}
	case "tool-approval-response":
		for _, i := range a.tools {
			if ap, ok := a.msg.Parts[i]["approval"].(map[string]any); ok && ap["id"] == f.StringField("approvalId") {
				approved, _ := fieldAny(f, "approved")
				ap["approved"] = approved
				if r := f.StringField("reason"); r != "" {
					ap["reason"] = r
				}
				a.msg.Parts[i]["state"] = "approval-responded"
			}
		}
	case "tool-output-available":
		if p := tool(); p != nil {
			p["state"] = "output-available"
			a.copyFields(f, p, "output", "preliminary")
		}
	case "tool-output-error":
		if p := tool(); p != nil {
			p["state"] = "output-error"
			a.copyFields(f, p, "errorText")
		}
	case "tool-output-denied":
		if p := tool(); p != nil {
			p["state"] = "output-denied"
		}
	case "source-url", "source-document", "file", "reasoning-file":
		p := map[string]any{"type": typ}
		a.copyFields(f, p, "sourceId", "url", "title", "mediaType", "filename", "providerMetadata")
		a.push(p)
	default:
		if !strings.HasPrefix(typ, "data-") {
			return
		}
		if transient, _ := fieldAny(f, "transient"); transient == true {
			return
		}
		data, _ := fieldAny(f, "data")
		id, hasID := f.Field("id")
		if hasID {
			key := typ + "/" + string(id)
			if i, ok := a.data[key]; ok {
				a.msg.Parts[i]["data"] = data
				return
			}
			p := map[string]any{"type": typ, "id": f.StringField("id"), "data": data}
			a.data[key] = a.push(p)
			return
		}
		a.push(map[string]any{"type": typ, "data": data})
	}
}
