package api

import (
	"errors"
	"net/http"
	"strconv"

	"go.temporal.io/api/serviceerror"

	"github.com/astrabox/astrabox/store"
)

// retryAfterSeconds is the Retry-After every 503 carries: long enough for a
// restarted dependency to come back, short enough that a waiting client resumes
// soon after it does.
const retryAfterSeconds = 5

// headerRetryAfter tells the client when to try again.
const headerRetryAfter = "Retry-After"

// unavailableErrors maps a dependency that cannot be reached (PostgreSQL down,
// restarting or with its pool closed; Temporal's frontend gone) onto 503
// SERVICE_UNAVAILABLE, for every route at once. The server consults it first, so
// no domain mapping can turn an outage into a 404 or a 500.
func unavailableErrors(err error) (*Error, bool) {
	switch {
	case store.IsUnavailable(err):
		return Unavailable("the database is unavailable; try again shortly", nil), true
	case temporalUnavailable(err):
		return Unavailable("the workflow service is unavailable; try again shortly", nil), true
	}
	return nil, false
}

// temporalUnavailable reports a Temporal frontend that did not answer: the
// client's own retries ended on an unavailable or timed-out call.
func temporalUnavailable(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline)
}

// setRetryAfter adds Retry-After to an answer that says "try again later".
func setRetryAfter(h http.Header, status int) {
	if status == http.StatusServiceUnavailable {
		h.Set(headerRetryAfter, strconv.Itoa(retryAfterSeconds))
	}
}
