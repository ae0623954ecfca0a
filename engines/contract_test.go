package engines_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

func TestRuntimeVersionsValidate(t *testing.T) {
	t.Parallel()
	good := engines.RuntimeVersions{RuntimeGeneration: "boot-1", Components: []engines.RuntimeComponent{
		engines.KnownComponent("claude_code", "2.1.328", "claude --version"),
		engines.UnknownComponent("sdk", "pip metadata", "distribution not installed"),
	}}
	require.NoError(t, good.Validate())
	require.NoError(t, engines.ServerInfo{}.Validate(), "absent information is explicitly unknown, and valid")
	data, err := json.Marshal(good)
	require.NoError(t, err)
	require.Contains(t, string(data), `"component":"sdk","version":null,"source":"pip metadata","reason":"distribution not installed"`)

	empty := ""
	for name, bad := range map[string]engines.RuntimeVersions{
		"no generation":          {Components: good.Components},
		"unnamed component":      {RuntimeGeneration: "g", Components: []engines.RuntimeComponent{engines.KnownComponent("", "1", "s")}},
		"no source":              {RuntimeGeneration: "g", Components: []engines.RuntimeComponent{engines.KnownComponent("c", "1", "")}},
		"empty version string":   {RuntimeGeneration: "g", Components: []engines.RuntimeComponent{{Component: "c", Version: &empty, Source: "s"}}},
		"unknown without reason": {RuntimeGeneration: "g", Components: []engines.RuntimeComponent{{Component: "c", Source: "s"}}},
		"duplicate component":    {RuntimeGeneration: "g", Components: []engines.RuntimeComponent{engines.KnownComponent("c", "1", "s"), engines.KnownComponent("c", "2", "s")}},
	} {
		require.Error(t, bad.Validate(), name)
		require.Error(t, engines.ServerInfo{RuntimeVersions: &bad}.Validate(), name)
	}
}

func liveClient(kind, key string, modes ...string) *fullClient {
	return &fullClient{bareClient{kind: kind, key: key, live: true, manifest: engines.EngineCapabilityManifest{
		EngineKind: kind, PermissionModes: modes, InputContentTypes: []engines.InputContentType{engines.InputText},
		Controls: []engines.Control{engines.ControlInterrupt},
	}}}
}

func TestInitializeRuntimeClient(t *testing.T) {
	t.Parallel()
	caps := validCaps("example")
	ctx := t.Context()
	m, err := engines.InitializeRuntimeClient(ctx, liveClient("example", "conv-1", "acceptEdits", "default"), caps, "conv-1")
	require.NoError(t, err)
	require.True(t, m.HasControl(engines.ControlInterrupt))
	_, err = engines.InitializeRuntimeClient(ctx, liveClient("example", "conv-new", "default", "acceptEdits"), caps, "")
	require.NoError(t, err, "a new Session has no resume key")

	notLive := liveClient("example", "conv-1", "default", "acceptEdits")
	notLive.live = false
	noTypes := liveClient("example", "conv-1", "default", "acceptEdits")
	noTypes.manifest.InputContentTypes = nil
	badManifestKind := liveClient("example", "conv-1", "default", "acceptEdits")
	badManifestKind.manifest.EngineKind = "other"
	for name, tc := range map[string]struct {
		client engines.RuntimeClient
		resume string
		want   string
	}{
		"nil client":            {nil, "", "nil client"},
		"not live":              {notLive, "conv-1", "not live"},
		"wrong kind":            {liveClient("other", "conv-1", "default", "acceptEdits"), "conv-1", `engine kind "other"`},
		"no session key":        {liveClient("example", "", "default", "acceptEdits"), "", "no engine session key"},
		"new conversation":      {liveClient("example", "conv-2", "default", "acceptEdits"), "conv-1", `resumed conversation "conv-2", requested "conv-1"`},
		"modes differ":          {liveClient("example", "conv-1", "default"), "conv-1", "permission modes"},
		"manifest kind differs": {badManifestKind, "conv-1", "manifest engine kind"},
		"no input types":        {noTypes, "conv-1", "no input content types"},
	} {
		_, err := engines.InitializeRuntimeClient(ctx, tc.client, caps, tc.resume)
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestInteractionContracts(t *testing.T) {
	t.Parallel()
	native := engines.NativeRequest{Type: "item/tool/requestUserInput", ID: "7", Payload: json.RawMessage(`{}`)}
	form := engines.FormContract(native, "Details", json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`))
	decision := engines.DecisionContract(native, "Pick", engines.DecisionOption{ID: "a", Label: "A"})
	approval := engines.ToolApprovalContract(native, "call-1", "Bash", json.RawMessage(`{}`), engines.DecisionOption{ID: "acceptForSession", Label: "Always"})
	for _, c := range []engines.InteractionContract{form, decision, approval} {
		require.NoError(t, engines.ValidateInteractionContract(c))
	}
	require.NoError(t, engines.ValidateInteractionAnswer(form, engines.InteractionAnswer{Values: json.RawMessage(`{"name":"x"}`)}))
	require.Error(t, engines.ValidateInteractionAnswer(form, engines.InteractionAnswer{Values: json.RawMessage(`{}`)}))
	require.Error(t, engines.ValidateInteractionAnswer(form, engines.InteractionAnswer{}))
	require.Error(t, engines.ValidateInteractionAnswer(form, engines.InteractionAnswer{Decision: "decline"}), "no such option declared")
	declinable := form
	declinable.Options = []engines.DecisionOption{{ID: "decline", Label: "Decline"}}
	require.NoError(t, engines.ValidateInteractionAnswer(declinable, engines.InteractionAnswer{Decision: "decline"}))
	require.NoError(t, engines.ValidateInteractionAnswer(decision, engines.InteractionAnswer{Decision: "a"}))
	require.Error(t, engines.ValidateInteractionAnswer(decision, engines.InteractionAnswer{Decision: "b"}))
	for _, d := range []string{"approve", "deny", "acceptForSession"} {
		require.NoError(t, engines.ValidateInteractionAnswer(approval, engines.InteractionAnswer{Decision: d}))
	}
	require.Error(t, engines.ValidateInteractionAnswer(approval, engines.InteractionAnswer{Decision: "maybe"}))

	bad := map[string]engines.InteractionContract{
		"no native identity":   engines.FormContract(engines.NativeRequest{}, "", json.RawMessage(`{"type":"object"}`)),
		"form schema array":    engines.FormContract(native, "", json.RawMessage(`[]`)),
		"form schema string":   engines.FormContract(native, "", json.RawMessage(`{"type":"string"}`)),
		"decision no options":  engines.DecisionContract(native, "Pick"),
		"duplicate option":     engines.DecisionContract(native, "Pick", engines.DecisionOption{ID: "a", Label: "A"}, engines.DecisionOption{ID: "a", Label: "B"}),
		"option without label": engines.DecisionContract(native, "Pick", engines.DecisionOption{ID: "a"}),
		"approval no tool":     {Presentation: engines.PresentationToolApproval, Native: native},
		"approval no name":     engines.ToolApprovalContract(native, "call-1", "", nil),
		"approval repeats approve": engines.ToolApprovalContract(native, "call-1", "Bash", nil,
			engines.DecisionOption{ID: "approve", Label: "Yes"}),
		"unknown presentation": {Presentation: "chat", Native: native},
	}
	for name, c := range bad {
		require.Error(t, engines.ValidateInteractionContract(c), name)
		_, err := engines.InteractionSegmentFrames("r", "i", c)
		require.Error(t, err, name)
	}
	_, err := engines.ToolApprovalRequestFrame("i", decision)
	require.Error(t, err)
}

func TestFrameJSON(t *testing.T) {
	t.Parallel()
	f, err := engines.ParseFrame([]byte(`{"toolCallId":"c","type":"tool-input-available","toolName":"Bash","input":{"b":1, "a":2}}`))
	require.NoError(t, err)
	require.Equal(t, `{"type":"tool-input-available","input":{"b":1,"a":2},"toolCallId":"c","toolName":"Bash"}`, f.String())
	pub := engines.PublicFrame(f)
	require.Equal(t, "true", mustField(t, pub, "dynamic"))
	_, had := f.Field("dynamic")
	require.False(t, had, "frames are immutable")

	out := engines.PublicFrame(engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: "c"}).WithRaw("dynamic", json.RawMessage("true")))
	_, has := out.Field("dynamic")
	require.False(t, has, "tool output parts do not carry dynamic")
	require.Equal(t, "null", mustField(t, out, "output"))
	text := engines.MustFrame(engines.TextDeltaChunk{ID: "t", Delta: "x"})
	require.True(t, engines.PublicFrame(text).Equal(text))

	var back engines.Frame
	require.NoError(t, json.Unmarshal([]byte(pub.String()), &back))
	require.True(t, back.Equal(pub))
	for _, bad := range []string{`[]`, `{"id":"x"}`, `{"type":""}`, `{"type":3}`, `null`} {
		_, err := engines.ParseFrame([]byte(bad))
		require.Error(t, err, bad)
	}
	with, err := text.With("providerMetadata", map[string]map[string]string{"x": {"y": "z"}})
	require.NoError(t, err)
	require.Equal(t, `{"type":"text-delta","delta":"x","id":"t","providerMetadata":{"x":{"y":"z"}}}`, with.String())
	require.Equal(t, []string{"type", "delta", "id"}, text.Keys())
	// Member names json.Marshal would escape are escaped as it does; others are written as they are.
	odd, err := engines.ParseFrame([]byte(`{"type":"a","é":3,"c\"d":2,"<b>":1,"plain-name_1":0}`))
	require.NoError(t, err)
	require.Equal(t, `{"type":"a","\u003cb\u003e":1,"c\"d":2,"plain-name_1":0,"é":3}`, odd.String())
	data, err := json.Marshal(engines.Frame{})
	require.NoError(t, err)
	require.Equal(t, "null", string(data))
}

func mustField(t *testing.T, f engines.Frame, key string) string {
	t.Helper()
	raw, ok := f.Field(key)
	require.True(t, ok, "frame %s has no %s", f, key)
	return string(raw)
}

func TestPartIDsAndRetractions(t *testing.T) {
	t.Parallel()
	start := engines.MustFrame(engines.TextStartChunk{ID: "p1", ProviderMetadata: engines.ProviderMetadata{"vendor": {"k": 1}}})
	marked := engines.WithPartID(start)
	id, ok := engines.PartID(marked)
	require.True(t, ok)
	require.Equal(t, "p1", id)
	require.Contains(t, marked.String(), `"vendor":{"k":1}`, "other provider metadata is kept")
	_, ok = engines.PartID(start)
	require.False(t, ok)

	var r engines.Retractions
	r.Retract("p1")
	f := r.Retract("p2")
	r.Retract("p1")
	require.Equal(t, []string{"p1", "p2"}, r.RetractedPartIDs())
	require.Equal(t, `{"type":"message-metadata","messageMetadata":{"retracted_part_ids":["p1","p2"]}}`, f.String())

	// An unmarked part is never omitted, even when its id is named.
	unmarked := engines.MustFrame(engines.TextStartChunk{ID: "p2"})
	kept := engines.OmitRetracted([]engines.Frame{marked, unmarked, f})
	require.Len(t, kept, 2)
	require.True(t, kept[0].Equal(unmarked))
}

func TestDataFrameValidation(t *testing.T) {
	t.Parallel()
	_, err := engines.FileChangesFrame("", []engines.FileChange{{Path: "a"}})
	require.Error(t, err)
	_, err = engines.FileChangesFrame("c", nil)
	require.Error(t, err)
	_, err = engines.FileChangesFrame("c", []engines.FileChange{{Path: ""}})
	require.Error(t, err)
	_, err = engines.FileChangesFrame("c", []engines.FileChange{{Path: "a", Diff: &engines.FileDiff{Format: engines.DiffUnifiedPatch}}})
	require.ErrorContains(t, err, "pass a nil diff instead")
	_, err = engines.FileChangesFrame("c", []engines.FileChange{{Path: "a", Diff: &engines.FileDiff{Format: "guess"}}})
	require.Error(t, err)
	before, after := "a\n", "b\n"
	f, err := engines.FileChangesFrame("c", []engines.FileChange{
		{Path: "a", Diff: nil},
		{Path: "b", Diff: &engines.FileDiff{Format: engines.DiffContentPair, Before: &before, After: &after}},
		{Path: "c", Diff: &engines.FileDiff{Format: engines.DiffHunks, Hunks: []engines.DiffHunk{{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1, Lines: []string{"-a", "+b"}}}}},
		{Path: "d", Diff: &engines.FileDiff{Format: engines.DiffExcerpt, Excerpt: "+b"}},
	})
	require.NoError(t, err)
	require.Contains(t, f.String(), `{"path":"a","diff":null}`, "a confirmed write without comparison keeps diff: null")

	id1, id2 := engines.ChildRunID("sess-1", "task-1"), engines.ChildRunID("sess-1", "task-1")
	require.Equal(t, id1, id2, "child run ids are deterministic")
	require.NotEqual(t, id1, engines.ChildRunID("sess-2", "task-1"), "child run ids are namespaced by Session")
	require.NotEqual(t, id1, engines.ChildRunID("sess-1", "task-2"))
	sub, err := engines.SubagentFrame("sess-1", engines.ChildRun{NativeRef: "task-1", ParentNativeRef: "task-0", Status: "running"})
	require.NoError(t, err)
	require.NotContains(t, sub.String(), "task-1", "the native reference stays private")
	require.Contains(t, sub.String(), engines.ChildRunID("sess-1", "task-0"))
	_, err = engines.SubagentFrame("sess-1", engines.ChildRun{Status: "running"})
	require.Error(t, err)
	_, err = engines.SubagentMessageFrame("sess-1", "task-1", engines.ChildRunMessage{MessageID: "m", Parts: json.RawMessage(`{`)})
	require.Error(t, err)

	require.Equal(t, `{"type":"data-resume-cursor","data":{"seq":42},"id":"resume-cursor","transient":true}`, engines.ResumeCursorFrame(42).String())
	for _, seq := range []int64{0, 1, 42, 1 << 40, -1} {
		want, err := engines.ResumeCursorFrame(seq).MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(engines.AppendResumeCursorJSON([]byte("x"), seq))[1:], "the stream's cursor for seq %d", seq)
	}
}

// memBox is an in-memory Box for the script writer test.
type memBox struct {
	files   map[string][]byte
	corrupt bool
}

func (b *memBox) ID() string { return "box-1" }
func (b *memBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return nil, errors.New("not supported")
}
func (b *memBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, path string) ([]byte, error) {
	data, ok := b.files[path]
	if !ok {
		return nil, errors.New("no such file")
	}
	if b.corrupt {
		return bytes.ToUpper(data), nil
	}
	return data, nil
}
func (b *memBox) WriteFile(_ context.Context, _ *engines.RuntimeIdentity, path string, data []byte, _ uint32) error {
	b.files[path] = bytes.Clone(data)
	return nil
}
func (b *memBox) DialPort(context.Context, int) (net.Conn, error) { return nil, errors.New("no ports") }

var _ engines.Box = (*memBox)(nil)

func TestInstallVerifiedTextScript(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	box := &memBox{files: map[string][]byte{}}
	require.NoError(t, engines.InstallVerifiedTextScript(ctx, box, nil, "/opt/start.sh", "#!/bin/sh\necho hi\n"))
	require.Equal(t, "#!/bin/sh\necho hi\n", string(box.files["/opt/start.sh"]))

	id := &engines.RuntimeIdentity{Account: "u1", UID: 1001, GID: 1001, HomeDir: "/home/u1", WorkspaceDir: "/w",
		SourceDir: "/w/src", FileRoot: "/w/files", CacheDir: "/home/u1/.cache", TempDir: "/tmp/u1"}
	require.NoError(t, engines.InstallVerifiedTextScript(ctx, box, id, "/w/run.sh", "x"))

	partial := &engines.RuntimeIdentity{Account: "u1"}
	err := engines.InstallVerifiedTextScript(ctx, box, partial, "/w/other.sh", "x")
	require.ErrorContains(t, err, "incomplete runtime identity")
	_, written := box.files["/w/other.sh"]
	require.False(t, written, "an incomplete identity is refused before any write")

	box.corrupt = true
	err = engines.InstallVerifiedTextScript(ctx, box, nil, "/opt/x.sh", "abc")
	require.True(t, err != nil && strings.Contains(err.Error(), "differ"), "got %v", err)
}

func TestRuntimeStateValidate(t *testing.T) {
	t.Parallel()
	contract := engines.DecisionContract(engines.NativeRequest{Type: "q", ID: "1"}, "?", engines.DecisionOption{ID: "a", Label: "A"})
	cursor := engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`3`)}
	good := engines.RuntimeState{
		Status:              engines.StatusWaiting,
		OpenResponses:       []engines.OpenResponse{{ResponseID: "r", Origin: engines.OriginInput, InputIDs: []string{"i"}}},
		PendingInteractions: []engines.PendingInteraction{{ResponseID: "r", InteractionID: "x", Contract: contract}},
		ClosedInteractions:  []engines.ClosedInteraction{{InteractionID: "y", Reason: engines.ClosureAnswered}},
		AdmittedInputIDs:    []string{"i"},
		Cursor:              &cursor,
	}
	require.NoError(t, good.Validate())
	bad := good
	bad.ClosedInteractions = []engines.ClosedInteraction{{InteractionID: "x", Reason: engines.ClosureExpired}}
	require.ErrorContains(t, bad.Validate(), "both pending and closed")
	bad = good
	bad.Status = "busy"
	require.Error(t, bad.Validate())
	bad = good
	bad.OpenResponses = []engines.OpenResponse{{ResponseID: "r", Origin: "user"}}
	require.Error(t, bad.Validate())
	bad = good
	bad.ClosedInteractions = []engines.ClosedInteraction{{InteractionID: "z", Reason: "lost"}}
	require.Error(t, bad.Validate())
	bad = good
	bad.Cursor = &engines.RuntimeCursor{}
	require.Error(t, bad.Validate())
}

func TestStorageValues(t *testing.T) {
	t.Parallel()
	f := engines.MustFrame(engines.TextDeltaChunk{ID: "t", Delta: "x"})
	v, err := f.Value()
	require.NoError(t, err)
	var back engines.Frame
	require.NoError(t, back.Scan(v))
	require.True(t, back.Equal(f))
	require.NoError(t, back.Scan(string(v.([]byte))))
	require.Error(t, back.Scan(42))

	c := engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`{"n":1}`)}
	cv, err := c.Value()
	require.NoError(t, err)
	var cb engines.RuntimeCursor
	require.NoError(t, cb.Scan(cv))
	require.True(t, cb.Equal(c))

	ev := engines.EventEnvelope{Event: engines.InputAdmitted{Cursor: c, InputID: "in-1"}}
	evv, err := ev.Value()
	require.NoError(t, err)
	var evb engines.EventEnvelope
	require.NoError(t, evb.Scan(evv))
	require.Equal(t, ev.Event, evb.Event)

	segment, err := engines.InteractionSegmentFrames("r", "i", engines.DecisionContract(engines.NativeRequest{Type: "q", ID: "1"}, "?", engines.DecisionOption{ID: "a", Label: "A"}))
	require.NoError(t, err)
	require.False(t, engines.FinishesResponse(segment[len(segment)-1]), "an interaction segment's finish does not end the response")
	end := engines.ResponseEndFrames(engines.ResponseEnded{Outcome: engines.OutcomeCancelled})
	require.True(t, engines.FinishesResponse(end[len(end)-1]))
	require.False(t, engines.FinishesResponse(f))
}
