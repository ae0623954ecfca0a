package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestARequestItsClientAbandonedIsNotAnInternalError: a store call cancelled because
// the client went away (a reload mid-request) is logged as abandoned, not as a failed
// request, while the same error under a live request is still the platform's.
func TestARequestItsClientAbandonedIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	s := &Server{log: zap.New(core)}
	storeErr := fmt.Errorf("get api token by hash: %w", context.Canceled)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/v1/me", nil).WithContext(gone)
	s.fail(c, storeErr)
	require.Equal(t, statusClientClosedRequest, w.Code)
	require.Empty(t, w.Body.String())
	require.Zero(t, logs.FilterLevelExact(zapcore.ErrorLevel).Len())
	require.Equal(t, 1, logs.FilterMessage("request abandoned by its client").Len())

	w = httptest.NewRecorder()
	c, _ = gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
	s.fail(c, storeErr)
	require.Equal(t, http.StatusInternalServerError, w.Code, "a cancellation the client did not cause is still an error")
	require.Equal(t, 1, logs.FilterLevelExact(zapcore.ErrorLevel).Len())
}
