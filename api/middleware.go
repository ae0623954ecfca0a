package api

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// RequestIDHeader carries the request id in and out. A caller may supply its own to
// correlate logs across systems: up to 128 letters, digits and - _ . : characters;
// anything else is replaced by a minted id, so no caller's bytes reach a response
// header or a log line unchecked.
const RequestIDHeader = "X-Request-ID"

const (
	requestIDKey     = "astrabox.request_id"
	requestLoggerKey = "astrabox.logger"
	maxRequestIDLen  = 128
)

// requestContext gives each request an id and a logger carrying it, then writes
// one access line when the request ends.
func (s *Server) requestContext(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !validRequestID(id) {
		id = newRequestID()
	}
	c.Header(RequestIDHeader, id)
	log := s.log.With(zap.String("request_id", id))
	c.Set(requestIDKey, id)
	c.Set(requestLoggerKey, log)

	start := time.Now()
	c.Next()
	log.Info("request",
		zap.String("method", c.Request.Method),
		zap.String("path", c.FullPath()),
		zap.Int("status", c.Writer.Status()),
		zap.Duration("latency", time.Since(start)),
	)
}

// recoverPanic turns a handler panic into an INTERNAL_ERROR envelope, logged
// with the request id, instead of a dropped connection.
func (s *Server) recoverPanic(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			RequestLogger(c, s.log).Error("handler panicked", zap.Any("panic", r), zap.Stack("stack"))
			s.fail(c, &Error{Status: 500, Code: CodeInternal, Message: "internal error"})
		}
	}()
	c.Next()
}

// RequestLogger returns the request's logger (with its request id), or fallback
// outside a request.
func RequestLogger(c *gin.Context, fallback *zap.Logger) *zap.Logger {
	if v, ok := c.Get(requestLoggerKey); ok {
		if l, ok := v.(*zap.Logger); ok {
			return l
		}
	}
	return fallback
}

// validRequestID accepts a caller's request id of a bounded, safe character set.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux.
	return hex.EncodeToString(b[:])
}
