package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogEntriesConsumeCompleteLinesAndAFinishedLastOne: the mirror's cursor passes
// every complete line (blank and invalid ones hold no entry) and an unterminated last
// line only once it is valid JSON; a line still being written is read again.
func TestLogEntriesConsumeCompleteLinesAndAFinishedLastOne(t *testing.T) {
	for _, tc := range []struct {
		name     string
		chunk    string
		entries  []string
		consumed int64
	}{
		{"empty", "", nil, 0},
		{"complete lines", "{\"a\":1}\n\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}, 17},
		{"an invalid complete line", "not json\n{\"a\":1}\n", []string{`{"a":1}`}, 17},
		{"a line being written", "{\"a\":1}\n{\"b\":", []string{`{"a":1}`}, 8},
		{"a finished last line", "{\"a\":1}\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}, 15},
		{"the newline after a finished line", "\n{\"c\":3}\n", []string{`{"c":3}`}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, consumed := logEntries([]byte(tc.chunk))
			var got []string
			for _, e := range entries {
				got = append(got, string(e))
			}
			require.Equal(t, tc.entries, got)
			require.Equal(t, tc.consumed, consumed)
		})
	}
}
