// Package logging builds the process's zap logger from configuration and adapts
// it for libraries that bring their own logging interface (the Temporal SDK).
package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/astrabox/astrabox/config"
)

// New builds the logger: console format for people at a terminal (`astrabox dev`),
// JSON for everything that ships logs elsewhere.
func New(cfg config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.Level)
	if err != nil {
		return nil, fmt.Errorf("parse log level: %w", err)
	}
	var zc zap.Config
	switch cfg.Format {
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		zc.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		zc.DisableStacktrace = true
	case "json", "":
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
		zc.Sampling = nil
	default:
		return nil, fmt.Errorf("unknown log format %q", cfg.Format)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Development = false
	logger, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return logger, nil
}
