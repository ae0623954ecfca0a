package devmodel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequestLogKeepsTheNewest(t *testing.T) {
	t.Parallel()
	l := newRequestLog(2)
	for range 3 {
		l.add(Request{Outcome: OutcomeActive})
	}
	l.update(1, func(r *Request) { r.Outcome = OutcomeCompleted }) // forgotten: no effect
	l.update(3, func(r *Request) { r.Outcome = OutcomeCompleted })
	got := l.snapshot()
	require.Len(t, got, 2)
	require.Equal(t, 2, got[0].Seq)
	require.Equal(t, OutcomeActive, got[0].Outcome)
	require.Equal(t, 3, got[1].Seq)
	require.Equal(t, OutcomeCompleted, got[1].Outcome)
}
