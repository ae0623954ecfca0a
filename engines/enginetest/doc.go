// Package enginetest holds the conformance checks every engine adapter's tests run:
// the adapter contract suite, the runtime-client contract suite, and the cursor
// determinism check over recordings. The suites are structural (declarations, types,
// encodings); driving a real conversation belongs to an adapter's end-to-end tests.
//
// A typical adapter test file:
//
//	func TestAdapterContract(t *testing.T) {
//		enginetest.RunAdapterContract(t, example.NewAdapter())
//	}
//
//	func TestRuntimeClientContract(t *testing.T) {
//		enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*example.Client](),
//			enginetest.WithCapabilities(example.NewAdapter().Capabilities()))
//	}
//
//	func TestCursorDeterminism(t *testing.T) {
//		recording := enginetest.MustLoadRecording(t, "testdata/plain_text.events.jsonl")
//		enginetest.CheckCursorDeterminism(t, recording, translatorOver("testdata/plain_text.jsonl"))
//	}
//
// The checks report through testing.TB's Errorf only, so every problem is listed in one
// run and the checks can be exercised with a recording testing.TB double.
package enginetest
