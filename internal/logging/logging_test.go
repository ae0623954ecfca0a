package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/astrabox/astrabox/config"
)

func TestNewFormats(t *testing.T) {
	for _, format := range []string{"console", "json", ""} {
		logger, err := New(config.Log{Level: "debug", Format: format})
		require.NoError(t, err, format)
		assert.True(t, logger.Core().Enabled(zapcore.DebugLevel))
	}
	_, err := New(config.Log{Level: "info", Format: "xml"})
	require.Error(t, err)
	_, err = New(config.Log{Level: "loud", Format: "json"})
	require.Error(t, err)
}

func TestTemporalAdapterKeepsFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	tl := NewTemporal(zap.New(core)).With("Namespace", "default")
	tl.Info("workflow started", "WorkflowID", "session/abc", "Attempt", 2, "dangling")
	tl.Error("failed", 42, "not a string key")

	entries := logs.All()
	require.Len(t, entries, 2)
	got := entries[0].ContextMap()
	assert.Equal(t, "default", got["Namespace"])
	assert.Equal(t, "session/abc", got["WorkflowID"])
	assert.EqualValues(t, 2, got["Attempt"])
	assert.Equal(t, "dangling", got["extra"])
	assert.Equal(t, zapcore.ErrorLevel, entries[1].Level)
	assert.Equal(t, "not a string key", entries[1].ContextMap()["42"])
}

// withCounter counts the copies its With makes: each is what a logger given fields
// holds from then on.
type withCounter struct {
	zapcore.Core
	copies *int
}

func (c withCounter) With(fields []zapcore.Field) zapcore.Core {
	*c.copies++
	return withCounter{Core: c.Core.With(fields), copies: c.copies}
}

func TestTemporalAdapterEncodesFieldsOnFirstWrite(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	copies := 0
	tl := NewTemporal(zap.New(withCounter{Core: core, copies: &copies})).With("WorkflowID", "session/abc")
	tl.Debug("below the level")
	assert.Zero(t, copies, "a logger that has not written holds no copy of its fields")

	tl.Info("written")
	assert.Equal(t, 1, copies)
	require.Len(t, logs.All(), 1)
	assert.Equal(t, "session/abc", logs.All()[0].ContextMap()["WorkflowID"])
}
