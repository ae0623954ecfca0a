package runnerapi

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	lines := []sandbox.OutputLine{
		{Offset: 1, Stream: sandbox.Stdout, Data: []byte(`{"type":"system"}`)},
		{Offset: 2, Stream: sandbox.Stderr, Data: []byte("warning: \x00 binary \xff")},
		{Offset: 3, Stream: sandbox.Stdout, Data: []byte{}},
	}
	var buf []byte
	for _, l := range lines {
		buf = AppendRecord(buf, l.Offset, l.Stream, l.Data)
	}
	buf = AppendEnd(buf, EndExited)
	dec := NewDecoder(bytes.NewReader(buf))
	for _, want := range lines {
		got, err := dec.Next()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := dec.Next()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, EndExited, dec.End)
}

func TestTornRecordIsNotALine(t *testing.T) {
	t.Parallel()
	buf := AppendRecord(nil, 1, sandbox.Stdout, []byte("complete"))
	buf = append(buf, AppendRecord(nil, 2, sandbox.Stdout, []byte("torn record"))[:12]...)
	dec := NewDecoder(bytes.NewReader(buf))
	_, err := dec.Next()
	require.NoError(t, err)
	_, err = dec.Next()
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF), "got %v", err)
}

func TestErrorCodesMapBack(t *testing.T) {
	t.Parallel()
	for _, sentinel := range []error{sandbox.ErrNoProcess, sandbox.ErrProcessExited, sandbox.ErrStdinClosed, sandbox.ErrInvalidSpec, sandbox.ErrJournalFailing, sandbox.ErrOutputReleased} {
		require.ErrorIs(t, SentinelFor(CodeFor(sentinel)), sentinel)
	}
}
