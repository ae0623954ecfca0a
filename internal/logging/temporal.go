package logging

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// Temporal adapts a zap logger to the Temporal SDK's logger so the SDK, workers
// and workflow.GetLogger all write through the process's one logger.
type Temporal struct {
	z *zap.Logger
}

var (
	_ log.Logger          = (*Temporal)(nil)
	_ log.WithLogger      = (*Temporal)(nil)
	_ log.WithSkipCallers = (*Temporal)(nil)
)

// NewTemporal wraps z for the Temporal SDK.
func NewTemporal(z *zap.Logger) *Temporal {
	// One extra caller frame: the adapter's own method.
	return &Temporal{z: z.WithOptions(zap.AddCallerSkip(1))}
}

// Debug implements log.Logger.
func (t *Temporal) Debug(msg string, keyvals ...any) { t.z.Debug(msg, fields(keyvals)...) }

// Info implements log.Logger.
func (t *Temporal) Info(msg string, keyvals ...any) { t.z.Info(msg, fields(keyvals)...) }

// Warn implements log.Logger.
func (t *Temporal) Warn(msg string, keyvals ...any) { t.z.Warn(msg, fields(keyvals)...) }

// Error implements log.Logger.
func (t *Temporal) Error(msg string, keyvals ...any) { t.z.Error(msg, fields(keyvals)...) }

// With implements log.WithLogger. The fields are encoded when the logger first
// writes: the SDK makes such a logger for every workflow it caches and every
// activity it runs, most of which never log, and an encoded copy holds a buffer.
func (t *Temporal) With(keyvals ...any) log.Logger {
	return &Temporal{z: t.z.WithLazy(fields(keyvals)...)}
}

// WithCallerSkip implements log.WithSkipCallers.
func (t *Temporal) WithCallerSkip(depth int) log.Logger {
	return &Temporal{z: t.z.WithOptions(zap.AddCallerSkip(depth))}
}

// fields turns the SDK's alternating key/value list into zap fields. A dangling
// key is kept under "extra" rather than dropped.
func fields(keyvals []any) []zap.Field {
	out := make([]zap.Field, 0, len(keyvals)/2+1)
	for i := 0; i < len(keyvals); i += 2 {
		if i+1 >= len(keyvals) {
			out = append(out, zap.Any("extra", keyvals[i]))
			break
		}
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		out = append(out, zap.Any(key, keyvals[i+1]))
	}
	return out
}
