package runnerapi

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	lines := []sandbox.OutputLine{
		{Offset: 1, Stream: sandbox.Stdout, Data: []byte(`{"type":"system"}`)},
		{Offset: 2, Stream: sandbox.Stderr, Data: []byte("warning: \x00 binary \xff")},
		{Offset: 3, Stream: sandbox.Stdout, Data: []byte{}},
		// Far larger than the decoder's buffer, which holds only headers.
		{Offset: 4, Stream: sandbox.Stdout, Data: bytes.Repeat([]byte("0123456789abcdef"), 4096)},
		{Offset: 5, Stream: sandbox.Stdout, Data: []byte(`{"type":"result"}`)},
	}
	var buf []byte
	for _, l := range lines {
		buf = AppendRecord(buf, l.Offset, l.Stream, l.Data)
	}
	buf = AppendEnd(buf, EndExited)
	// Whole, and as a connection may deliver it: a few bytes per read.
	for _, r := range []io.Reader{bytes.NewReader(buf), iotest.HalfReader(bytes.NewReader(buf))} {
		dec := NewDecoder(r)
		for _, want := range lines {
			got, err := dec.Next()
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
		_, err := dec.Next()
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, EndExited, dec.End)
	}
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
