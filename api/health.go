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
	results, err := runChecks(c.Request.Context(), s.checks, RequestLogger(c, s.log))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, Envelope{Code: CodeOK, Message: "success", Data: readyData(results)})
}

func readyData(results map[string]string) gin.H {
	return gin.H{"status": "ready", "checks": results}
}

// runChecks probes every dependency, each within checkTimeout. It returns the
// result per dependency, and an Unavailable error carrying them when any failed.
func runChecks(ctx context.Context, checks []Check, log *zap.Logger) (map[string]string, error) {
	results := make(map[string]string, len(checks))
	failed := false
	for _, check := range checks {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := check.Probe(cctx)
		cancel()
		if err != nil {
			failed = true
			results[check.Name] = checkFailed
			log.Warn("readiness check failed", zap.String("dependency", check.Name), zap.Error(err))
			continue
		}
		results[check.Name] = checkOK
	}
	if failed {
		return results, Unavailable("not ready", gin.H{"checks": results})
	}
	return results, nil
}
