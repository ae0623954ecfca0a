package engines_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/uicheck"
)

// TestValidateFrameAgreesWithTheAIClient runs valid and invalid chunks through both
// ValidateFrame and the ai client's own schema and requires the same verdict for each.
func TestValidateFrameAgreesWithTheAIClient(t *testing.T) {
	t.Parallel()
	candidates := []string{
		`{"type":"text-start","id":"t"}`,
		`{"type":"text-start"}`,
		`{"type":"text-start","id":7}`,
		`{"type":"text-delta","id":"t","delta":"x"}`,
		`{"type":"text-delta","id":"t"}`,
		`{"type":"text-end","id":"t","providerMetadata":{"astrabox":{"part_id":"t"}}}`,
		`{"type":"text-end","id":"t","providerMetadata":{"x":1}}`,
		`{"type":"text-end","id":"t","providerMetadata":null}`,
		`{"type":"error","errorText":"e"}`,
		`{"type":"error"}`,
		`{"type":"tool-input-start","toolCallId":"c","toolName":"n","dynamic":true,"title":"T","inputEncoding":"text"}`,
		`{"type":"tool-input-start","toolCallId":"c","toolName":"n","inputEncoding":"xml"}`,
		`{"type":"tool-input-start","toolCallId":"c","toolName":"n","dynamic":"yes"}`,
		`{"type":"tool-input-start","toolCallId":"c"}`,
		`{"type":"tool-input-delta","toolCallId":"c","inputTextDelta":"{"}`,
		`{"type":"tool-input-available","toolCallId":"c","toolName":"n","input":null}`,
		`{"type":"tool-input-available","toolCallId":"c","toolName":"n"}`,
		`{"type":"tool-input-available","toolCallId":"c","toolName":"n","input":{},"toolMetadata":{"a":1}}`,
		`{"type":"tool-input-available","toolCallId":"c","toolName":"n","input":{},"toolMetadata":[1]}`,
		`{"type":"tool-input-error","toolCallId":"c","toolName":"n","input":1,"errorText":"e"}`,
		`{"type":"tool-input-error","toolCallId":"c","toolName":"n","errorText":"e"}`,
		`{"type":"tool-approval-request","approvalId":"a","toolCallId":"c","reason":"r","isAutomatic":false}`,
		`{"type":"tool-approval-request","approvalId":"a"}`,
		`{"type":"tool-approval-response","approvalId":"a","approved":true}`,
		`{"type":"tool-approval-response","approvalId":"a","approved":"yes"}`,
		`{"type":"tool-output-available","toolCallId":"c","output":null,"preliminary":true}`,
		`{"type":"tool-output-available","toolCallId":"c"}`,
		`{"type":"tool-output-available","toolCallId":"c","output":1,"title":5}`,
		`{"type":"tool-output-error","toolCallId":"c","errorText":"e"}`,
		`{"type":"tool-output-error","toolCallId":"c"}`,
		`{"type":"tool-output-denied","toolCallId":"c"}`,
		`{"type":"tool-output-denied"}`,
		`{"type":"reasoning-start","id":"r"}`,
		`{"type":"reasoning-delta","id":"r","delta":1}`,
		`{"type":"reasoning-end","id":"r"}`,
		`{"type":"custom","kind":"v.k"}`,
		`{"type":"custom"}`,
		`{"type":"source-url","sourceId":"s","url":"https://x"}`,
		`{"type":"source-url","sourceId":"s"}`,
		`{"type":"source-document","sourceId":"s","mediaType":"text/plain","title":"t"}`,
		`{"type":"source-document","sourceId":"s","mediaType":"text/plain"}`,
		`{"type":"file","url":"data:text/plain;base64,aGk=","mediaType":"text/plain"}`,
		`{"type":"file","url":"x"}`,
		`{"type":"reasoning-file","url":"data:,x","mediaType":"text/plain"}`,
		`{"type":"steering-message","id":"s","parts":[]}`,
		`{"type":"steering-message","id":"s"}`,
		`{"type":"data-x","data":null}`,
		`{"type":"data-x"}`,
		`{"type":"data-x","data":1,"id":2}`,
		`{"type":"data-x","data":1,"transient":"no"}`,
		`{"type":"start-step"}`,
		`{"type":"finish-step"}`,
		`{"type":"reset-step"}`,
		`{"type":"start"}`,
		`{"type":"start","messageId":"m","messageMetadata":null}`,
		`{"type":"start","messageId":3}`,
		`{"type":"finish","finishReason":"interrupted"}`,
		`{"type":"finish","finishReason":"unknown"}`,
		`{"type":"finish","finishReason":null}`,
		`{"type":"abort","reason":"r"}`,
		`{"type":"abort","reason":null}`,
		`{"type":"message-metadata","messageMetadata":null}`,
		`{"type":"message-metadata"}`,
		`{"type":"text","text":"x"}`,
		`{"type":"tool-call","toolCallId":"c"}`,
	}
	frames := make([]engines.Frame, len(candidates))
	for i, c := range candidates {
		f, err := engines.ParseFrame([]byte(c))
		require.NoError(t, err, c)
		frames[i] = f
	}
	r := uicheck.Check(t, frames, nil)
	rejected := map[int]string{}
	for _, e := range r.ChunkErrors {
		rejected[e.Index] = e.Message
	}
	valid, invalid := 0, 0
	for i, f := range frames {
		goErr := engines.ValidateFrame(f)
		clientMsg, clientRejects := rejected[i]
		if clientRejects {
			invalid++
			require.Error(t, goErr, "the ai client rejects %s (%s) but ValidateFrame accepts it", candidates[i], clientMsg)
		} else {
			valid++
			require.NoError(t, goErr, "the ai client accepts %s but ValidateFrame rejects it", candidates[i])
		}
	}
	require.Greater(t, valid, 20)
	require.Greater(t, invalid, 20)

	// Every frame the helpers build passes.
	for _, f := range []engines.Frame{
		engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: "r", Origin: engines.OriginEngine}),
		engines.ResumeCursorFrame(1), engines.InputFailedFrame("i", "c", "m"),
		engines.ToolApprovalResponseFrame("i", false, "no"),
		engines.PublicFrame(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "c", ToolName: "n", Input: json.RawMessage(`{}`)})),
	} {
		require.NoError(t, engines.ValidateFrame(f), "%s", f)
	}
}
