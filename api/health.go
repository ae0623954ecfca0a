package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// Check is one dependency /readyz reports on.
type Check struct {
	// Name labels the dependency in the response (database, temporal).
	Name string
	// Probe returns nil when the dependency answers.
	Probe func(ctx context.Context) error
}

// checkTimeout bounds each probe so a hung dependency makes /readyz answer 503
// rather than hang.
const checkTimeout = 3 * time.Second

// healthz answers as long as the process serves HTTP.
func (s *Server) healthz(c *gin.Context) {
	writeOK(c, gin.H{"status": "up"})
}

// The result of one check as /readyz shows it.
const (
	checkOK     = "ok"
	checkFailed = "failed"
)

// readyz answers 200 when every dependency answers, 503 naming the failing ones
// otherwise. It needs no token, so it says only which dependency failed; the cause
// (addresses, driver messages) goes to the log.
func (s *Server) readyz(c *gin.Context) {
	results := make(map[string]string, len(s.checks))
	failed := false
	for _, check := range s.checks {
		ctx, cancel := context.WithTimeout(c.Request.Context(), checkTimeout)
		err := check.Probe(ctx)
		cancel()
		if err != nil {
			failed = true
			results[check.Name] = checkFailed
			RequestLogger(c, s.log).Warn("readiness check failed", zap.String("dependency", check.Name), zap.Error(err))
			continue
		}
		results[check.Name] = checkOK
	}
	if failed {
		s.fail(c, Unavailable("not ready", gin.H{"checks": results}))
		return
	}
	c.JSON(http.StatusOK, Envelope{Code: CodeOK, Message: "success", Data: gin.H{"status": "ready", "checks": results}})
}
