package api

import (
	"fmt"
	"net/http"
	"sync"
)

// CodeTooManyStreams refuses a stream beyond http.max_streams_per_token.
const CodeTooManyStreams = "TOO_MANY_STREAMS"

// defaultMaxStreamsPerToken applies when Options.MaxStreamsPerToken is zero.
const defaultMaxStreamsPerToken = 16

// streamLimiter counts the open streams of each API token on this server, so one
// token cannot hold an unbounded number of connections and database listeners.
type streamLimiter struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func newStreamLimiter(max int) *streamLimiter {
	if max <= 0 {
		max = defaultMaxStreamsPerToken
	}
	return &streamLimiter{max: max, open: map[string]int{}}
}

// acquire takes a stream slot for tokenID and returns its release, or a 429 when the
// token already holds the most streams allowed.
func (l *streamLimiter) acquire(tokenID string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[tokenID] >= l.max {
		return nil, &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyStreams,
			Message: fmt.Sprintf("this token already holds %d open streams, the most allowed; close one first", l.max)}
	}
	l.open[tokenID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[tokenID]--; l.open[tokenID] <= 0 {
				delete(l.open, tokenID)
			}
		})
	}, nil
}
