package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func importBody(msgs ...map[string]any) map[string]any {
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = m
	}
	return map[string]any{"messages": list}
}

var (
	importUser = map[string]any{"source_id": "m-1", "role": "user", "created_at": "2026-01-05T09:00:00Z",
		"blocks": []any{map[string]any{"type": "text", "text": "Summarize the incident."}}}
	importReply = map[string]any{"source_id": "m-2", "role": "assistant", "created_at": "2026-01-05T09:00:20Z",
		"completion": "unknown", "parent_source_id": "m-1",
		"blocks": []any{
			map[string]any{"type": "thinking", "thinking": "check logs"},
			map[string]any{"type": "tool_use", "id": "t1", "name": "grep", "input": map[string]any{"q": "error"}},
			map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "3 hits"},
			map[string]any{"type": "text", "text": "The outage began when"},
		}}
	importLater = map[string]any{"source_id": "m-3", "role": "user", "created_at": "2026-01-05T09:01:00+02:00",
		"blocks": []any{map[string]any{"type": "image", "url": "https://example.test/a.png", "media_type": "image/png"}}}
)

func TestHistoryImport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/admin/sessions/" + id + "/history-import"
	f.call("POST", path, f.member, importBody(importUser)).refused(t, http.StatusForbidden, CodeForbidden)

	var res importResult
	f.call("POST", path, f.admin, importBody(importUser, importReply)).ok(t).into(t, &res)
	assert.Equal(t, importResult{SessionID: id, Imported: 2, Total: 2}, res)
	// The same import again changes nothing; a continuation repeats the imported first.
	f.call("POST", path, f.admin, importBody(importUser, importReply)).ok(t).into(t, &res)
	assert.Equal(t, 0, res.Imported)
	f.call("POST", path, f.admin, importBody(importUser, importReply, importLater)).ok(t).into(t, &res)
	assert.Equal(t, 1, res.Imported)

	changed := map[string]any{}
	for k, v := range importUser {
		changed[k] = v
	}
	changed["blocks"] = []any{map[string]any{"type": "text", "text": "Something else."}}
	f.call("POST", path, f.admin, importBody(changed)).refused(t, http.StatusConflict, CodeHistoryImportConflict)
	newFirst := map[string]any{"source_id": "m-0", "role": "user", "created_at": "2026-01-05T08:00:00Z", "blocks": []any{map[string]any{"type": "text", "text": "hi"}}}
	f.call("POST", path, f.admin, importBody(newFirst, importUser, importReply, importLater)).refused(t, http.StatusConflict, CodeHistoryImportConflict)

	// Imported messages read like any other, first, with history_import.
	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 3)
	reply := page.Messages[1]
	assert.Equal(t, "assistant", reply.Role)
	hi := reply.Metadata["history_import"].(map[string]any)
	assert.Equal(t, "m-2", hi["source_id"])
	assert.Equal(t, "unknown", hi["completion"])
	assert.Equal(t, "m-1", hi["parent_source_id"])
	var types []any
	for _, p := range reply.Parts {
		types = append(types, p["type"])
	}
	assert.Equal(t, []any{"reasoning", "dynamic-tool", "text"}, types)
	assert.Equal(t, "output-available", reply.Parts[1]["state"])
	assert.Equal(t, "file", page.Messages[2].Parts[0]["type"])
	assert.Equal(t, "CREATING", f.session(id, f.member).State, "an import changes no Session state")

	// Once the conversation has started, imports are refused.
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "hello"}).ok(t)
	f.call("POST", path, f.admin, importBody(importUser, importReply, importLater)).refused(t, http.StatusConflict, CodeHistoryImportAfterConversation)
	f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 4)
	assert.Equal(t, "user", page.Messages[3].Role)
	assert.Equal(t, "hello", page.Messages[3].Parts[0]["text"])
}

func TestHistoryImportRefusesBadMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/admin/sessions/" + id + "/history-import"
	with := func(base map[string]any, key string, value any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		if value == nil {
			delete(out, key)
		} else {
			out[key] = value
		}
		return out
	}
	many := make([]map[string]any, 501)
	for i := range many {
		many[i] = with(importUser, "source_id", "s"+strings.Repeat("x", i))
	}
	cases := []struct {
		body  any
		field string
	}{
		{map[string]any{"messages": []any{}}, "messages"},
		{importBody(many...), "messages"},
		{importBody(with(importUser, "source_id", nil)), "messages[0].source_id"},
		{importBody(importUser, importUser), "messages[1].source_id"},
		{importBody(with(importUser, "role", "system")), "messages[0].role"},
		{importBody(with(importUser, "created_at", "2026-01-05T09:00:00")), "messages[0].created_at"},
		{importBody(importUser, with(importReply, "completion", nil)), "messages[1].completion"},
		{importBody(with(importUser, "completion", "unknown")), "messages[0].completion"},
		{importBody(importUser, with(importReply, "completion", "great")), "messages[1].completion"},
		{importBody(with(importReply, "parent_source_id", "nope")), "messages[0].parent_source_id"},
		{importBody(with(importUser, "blocks", []any{map[string]any{"type": "thinking", "thinking": "x"}})), "messages[0].blocks[0].type"},
		{importBody(with(importUser, "blocks", []any{map[string]any{"type": "text", "txt": "x"}})), "messages[0].blocks[0].txt"},
		{importBody(importUser, with(importReply, "blocks", []any{map[string]any{"type": "tool_result", "tool_use_id": "t9"}})), "messages[1].blocks[0].tool_use_id"},
		{importBody(with(importUser, "extra", 1)), "messages[0].extra"},
	}
	for _, tc := range cases {
		r := f.call("POST", path, f.admin, tc.body).refused(t, http.StatusBadRequest, CodeInvalidRequest)
		assert.Contains(t, r.Message, tc.field)
	}
	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &page)
	assert.Empty(t, page.Messages, "refused imports wrote nothing")
}
