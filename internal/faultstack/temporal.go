package faultstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/internal/logging"
	"github.com/astrabox/astrabox/internal/temporaldev"
	"github.com/astrabox/astrabox/workflows"
)

// temporalStartAttempts bounds the starts of the Temporal dev server that die
// before it listens.
const temporalStartAttempts = 3

// startTemporal starts the Temporal CLI's dev server on the stack's port and
// database file, and waits until it accepts connections. A restart after a
// SIGKILL runs the same command on the same file: the histories survive.
//
// The dev server picks its internal services' ports by binding and releasing
// them, and the stack's own port was free only when it was picked, so another
// process on the machine (a parallel test's stack) can take one first and the
// server dies before it listens. Such a start is tried again, on a newly picked
// port while no client has been given the old one.
func (s *Stack) startTemporal(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= temporalStartAttempts; attempt++ {
		if !s.temporalListened {
			port, perr := freeport.Reserve()
			if perr != nil {
				return perr
			}
			s.temporalPort = port
		}
		err = s.startTemporalOnce(ctx)
		if err == nil {
			s.temporalListened = true
			return nil
		}
		if !errors.Is(err, errExitedOnItsOwn) || ctx.Err() != nil {
			return err
		}
		s.log.Warn("the Temporal dev server died before it listened; starting it again",
			zap.Int("attempt", attempt), zap.Error(err))
	}
	return err
}

func (s *Stack) startTemporalOnce(ctx context.Context) error {
	args := []string{s.opts.TemporalBin, "server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(s.temporalPort),
		"--headless",
		"--log-level", "warn",
	}
	args = append(args, temporaldev.DBArgs(filepath.Join(s.baseDir, "temporal.db"))...)
	for name, kind := range workflows.SearchAttributeNames() {
		args = append(args, "--search-attribute", name+"="+kind)
	}
	s.mu.Lock()
	s.starts["temporal"]++
	s.mu.Unlock()
	c, err := startChild("temporal", args, os.Environ(), s.logPath("temporal"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.temporal = c
	s.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.temporalPort))
	return poll(ctx, 100*time.Millisecond, "the Temporal dev server to listen on "+addr, func() (bool, error) {
		if err := c.exitedUnexpectedly(); err != nil {
			return false, err
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
}

// poll calls cond every interval until it reports done, fails, or ctx ends.
// Processes and servers of another process can only be watched this way.
func poll(ctx context.Context, interval time.Duration, what string, cond func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// RelayEnds reads the Session workflow's current run and returns how each of its
// Relays that did not complete ended: the failure's application error type (such as
// activities.ErrTypeRelayWorkerLost), "canceled", or "timeout:" and the timeout's kind
// (a Relay whose worker Temporal gave up on at its heartbeat timeout).
func (s *Stack) RelayEnds(ctx context.Context, sessionID string) ([]string, error) {
	tc, err := client.Dial(client.Options{HostPort: s.TemporalAddress(), Logger: logging.NewTemporal(zap.NewNop())})
	if err != nil {
		return nil, fmt.Errorf("dial temporal: %w", err)
	}
	defer tc.Close()
	relays := map[int64]bool{}
	var ends []string
	it := tc.GetWorkflowHistory(ctx, workflows.SessionWorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of session %s: %w", sessionID, err)
		}
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			relays[e.GetEventId()] = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "Relay"
		case e.GetActivityTaskFailedEventAttributes() != nil:
			a := e.GetActivityTaskFailedEventAttributes()
			if relays[a.GetScheduledEventId()] {
				ends = append(ends, a.GetFailure().GetApplicationFailureInfo().GetType())
			}
		case e.GetActivityTaskTimedOutEventAttributes() != nil:
			a := e.GetActivityTaskTimedOutEventAttributes()
			if relays[a.GetScheduledEventId()] {
				ends = append(ends, "timeout:"+a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType().String())
			}
		case e.GetActivityTaskCanceledEventAttributes() != nil:
			if relays[e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()] {
				ends = append(ends, "canceled")
			}
		}
	}
	return ends, nil
}
