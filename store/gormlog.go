package store

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// slowQuery is the duration above which a statement is logged as a warning.
const slowQuery = 500 * time.Millisecond

// gormLogger sends GORM's messages to zap. Failed statements are logged at debug level
// only: the store returns every error wrapped to its caller, which decides what to log.
type gormLogger struct {
	log *zap.Logger
}

var _ gormlogger.Interface = gormLogger{}

func newGormLogger(log *zap.Logger) gormLogger {
	return gormLogger{log: log.Named("gorm").WithOptions(zap.AddCallerSkip(3))}
}

// LogMode is part of gorm's logger interface; levels are zap's business here.
func (l gormLogger) LogMode(gormlogger.LogLevel) gormlogger.Interface { return l }

// Info logs a GORM informational message.
func (l gormLogger) Info(_ context.Context, msg string, args ...any) {
	l.log.Sugar().Infof(msg, args...)
}

// Warn logs a GORM warning.
func (l gormLogger) Warn(_ context.Context, msg string, args ...any) {
	l.log.Sugar().Warnf(msg, args...)
}

// Error logs a GORM error message.
func (l gormLogger) Error(_ context.Context, msg string, args ...any) {
	l.log.Sugar().Errorf(msg, args...)
}

// Trace logs slow statements and, at debug level, failed ones.
func (l gormLogger) Trace(_ context.Context, begin time.Time, fc func() (string, int64), err error) {
	elapsed := time.Since(begin)
	switch {
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound):
		if ce := l.log.Check(zap.DebugLevel, "statement failed"); ce != nil {
			sql, rows := fc()
			ce.Write(zap.String("sql", sql), zap.Int64("rows", rows), zap.Duration("elapsed", elapsed), zap.Error(err))
		}
	case elapsed > slowQuery:
		sql, rows := fc()
		l.log.Warn("slow statement", zap.String("sql", sql), zap.Int64("rows", rows), zap.Duration("elapsed", elapsed))
	}
}
