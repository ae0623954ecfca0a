package engines_test

import (
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/engines"
)

// A third party registers its adapter on the process's Registry at start-up; a bad
// declaration fails start-up with the adapter and the problem named.
func ExampleRegistry_Register() {
	reg := engines.NewRegistry()
	adapter := validAdapter("example")
	if err := reg.Register("example", adapter); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reg.Kinds())

	err := reg.Register("claude", validAdapter("claude-code"))
	fmt.Println(err)
	// Output:
	// [example]
	// engine adapter "claude" (*engines_test.testAdapter): engine_kind: engine_kind "claude-code" does not match the registration name "claude"
}

// A tool call reaches the browser as three parts; NewResponseOutput marks the input
// parts dynamic and leaves the output part alone.
func ExampleNewResponseOutput() {
	cursor := engines.RuntimeCursor{Generation: "runner-1", Position: json.RawMessage(`{"offset":12}`)}
	for _, chunk := range []engines.Chunk{
		engines.ToolInputStartChunk{ToolCallID: "toolu_1", ToolName: "Bash"},
		engines.ToolInputAvailableChunk{ToolCallID: "toolu_1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		engines.ToolOutputAvailableChunk{ToolCallID: "toolu_1", Output: json.RawMessage(`"README.md"`)},
	} {
		ev := engines.NewResponseOutput(cursor, "msg_1", engines.MustFrame(chunk))
		fmt.Println(ev.Frame)
	}
	// Output:
	// {"type":"tool-input-start","dynamic":true,"toolCallId":"toolu_1","toolName":"Bash"}
	// {"type":"tool-input-available","dynamic":true,"input":{"command":"ls"},"toolCallId":"toolu_1","toolName":"Bash"}
	// {"type":"tool-output-available","output":"README.md","toolCallId":"toolu_1"}
}

// A response that pauses on a tool approval closes its message segment and reopens the
// same message before continuing.
func ExampleInteractionSegmentFrames() {
	native := engines.NativeRequest{Type: "can_use_tool", ID: "req-1", Payload: json.RawMessage(`{"tool_name":"Bash"}`)}
	contract := engines.ToolApprovalContract(native, "toolu_1", "Bash", json.RawMessage(`{"command":"rm x"}`))
	frames, err := engines.InteractionSegmentFrames("msg_1", "int-1", contract)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range frames {
		fmt.Println(f.Type())
	}
	fmt.Println(engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: "msg_1", InputIDs: []string{"in-1"}, Origin: engines.OriginInput}))
	// Output:
	// tool-approval-request
	// data-interaction
	// finish
	// {"type":"start","messageId":"msg_1","messageMetadata":{"response_id":"msg_1","input_ids":["in-1"],"origin":"input"}}
}
