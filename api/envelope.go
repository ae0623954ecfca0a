package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// Envelope is the shape of every JSON response: {code, message, data}.
type Envelope struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// writeOK writes a success envelope.
func writeOK(c *gin.Context, data any) {
	c.JSON(http.StatusOK, Envelope{Code: CodeOK, Message: "success", Data: data})
}

// writeOKNow writes the success envelope with its length and flushes it, so the
// client has the whole answer while the handler goes on (with work the answer does not
// wait for).
func writeOKNow(c *gin.Context, data any) {
	body, err := json.Marshal(Envelope{Code: CodeOK, Message: "success", Data: data})
	if err != nil {
		writeOK(c, data)
		return
	}
	c.Header("Content-Length", strconv.Itoa(len(body)))
	c.Data(http.StatusOK, "application/json; charset=utf-8", body)
	c.Writer.Flush()
}

// statusClientClosedRequest records a request its client abandoned before the answer
// (the status nginx logs for it); no client is left to read it.
const statusClientClosedRequest = 499

// fail writes err through the single mapper and logs its cause. Handlers call it
// and return. A 503 carries Retry-After. A request that failed because its client
// went away (a closed tab, a reload) is not the platform's error: it is logged as
// abandoned and answered with no body.
func (s *Server) fail(c *gin.Context, err error) {
	log := RequestLogger(c, s.log)
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		log.Debug("request abandoned by its client", zap.Error(err))
		c.AbortWithStatus(statusClientClosedRequest)
		return
	}
	apiErr := toAPIError(err, s.errorMappers)
	if apiErr.Status >= 500 {
		log.Error("request failed", zap.String("code", apiErr.Code), zap.Error(err))
	} else {
		log.Debug("request refused", zap.String("code", apiErr.Code), zap.Error(err))
	}
	setRetryAfter(c.Writer.Header(), apiErr.Status)
	c.AbortWithStatusJSON(apiErr.Status, Envelope{Code: apiErr.Code, Message: apiErr.Message, Data: apiErr.Data})
}
