package api

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// unmatchedRoute labels requests no route matched, so a scan of random paths cannot
// grow the latency series without bound.
const unmatchedRoute = "unmatched"

// observe records each request's latency by route template, and, with tracing, runs
// the request in a server span that continues a caller's traceparent: everything the
// handler does with the request's context (the Temporal signal to the Session's
// workflow, and from there the workflow and its activities) joins that trace.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	var span trace.Span
	if s.tracer != nil {
		ctx := s.propagator.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		ctx, span = s.tracer.Start(ctx, c.Request.Method+" "+routeOf(c),
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", c.Request.Method), attribute.String("http.route", routeOf(c))))
		c.Request = c.Request.WithContext(ctx)
	}
	c.Next()
	status := c.Writer.Status()
	s.metrics.HTTPDuration.WithLabelValues(c.Request.Method, routeOf(c), strconv.Itoa(status)).Observe(time.Since(start).Seconds())
	if span != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if id, ok := c.Get(requestIDKey); ok {
			span.SetAttributes(attribute.String("astrabox.request_id", id.(string)))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		span.End()
	}
}

// routeOf is the request's route template (/api/v1/sessions/:session_id/inputs).
func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return unmatchedRoute
}
