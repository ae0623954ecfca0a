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

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
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

// ActivityEnds reads the Session workflow's current run and returns how each attempt
// of its activityType activities that did not complete ended, in order: the failure's
// application error type (such as activities.ErrTypeWorkerLost), "canceled", or
// "timeout:" and the timeout's kind (an attempt whose worker Temporal gave up on at a
// timeout). An attempt Temporal retried is read from its retry's start, which carries
// its failure.
func (s *Stack) ActivityEnds(ctx context.Context, sessionID, activityType string) ([]string, error) {
	tc, err := s.dialTemporal()
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	ours := map[int64]bool{}
	var ends []string
	it := tc.GetWorkflowHistory(ctx, workflows.SessionWorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of session %s: %w", sessionID, err)
		}
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			ours[e.GetEventId()] = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityType
		case e.GetActivityTaskStartedEventAttributes() != nil:
			a := e.GetActivityTaskStartedEventAttributes()
			if ours[a.GetScheduledEventId()] && a.GetLastFailure() != nil {
				ends = append(ends, failureEnd(a.GetLastFailure()))
			}
		case e.GetActivityTaskFailedEventAttributes() != nil:
			a := e.GetActivityTaskFailedEventAttributes()
			if ours[a.GetScheduledEventId()] {
				ends = append(ends, failureEnd(a.GetFailure()))
			}
		case e.GetActivityTaskTimedOutEventAttributes() != nil:
			a := e.GetActivityTaskTimedOutEventAttributes()
			if ours[a.GetScheduledEventId()] {
				ends = append(ends, failureEnd(a.GetFailure()))
			}
		case e.GetActivityTaskCanceledEventAttributes() != nil:
			if ours[e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()] {
				ends = append(ends, "canceled")
			}
		}
	}
	return ends, nil
}

// failureEnd names an attempt's failure as ActivityEnds does.
func failureEnd(f *failurepb.Failure) string {
	if t := f.GetTimeoutFailureInfo(); t != nil {
		return "timeout:" + t.GetTimeoutType().String()
	}
	return f.GetApplicationFailureInfo().GetType()
}

// WaitActivityRunning waits until a worker runs an activityType activity of the
// Session's workflow and has recorded the attempt for the host watch, and returns
// the attempt. Temporal lists an attempt started as soon as a worker takes its
// task, before the worker's recorder has written it down; a worker that dies in
// between leaves an attempt no other worker knows to fail, which only its timeout
// ends, so a fault meant to test the watch waits for the record too.
func (s *Stack) WaitActivityRunning(ctx context.Context, sessionID, activityType string) (int32, error) {
	tc, err := s.dialTemporal()
	if err != nil {
		return 0, err
	}
	defer tc.Close()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return 0, fmt.Errorf("connect to read the recorded activities: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	workflowID := workflows.SessionWorkflowID(sessionID)
	var attempt int32
	// Often: an activation lasts about a second.
	err = poll(ctx, 20*time.Millisecond, activityType+" to run for session "+sessionID, func() (bool, error) {
		d, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
		if err != nil {
			return false, nil // not started yet
		}
		for _, p := range d.GetPendingActivities() {
			if p.GetActivityType().GetName() != activityType || p.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			var recorded bool
			err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM worker_activities
				WHERE workflow_id = $1 AND activity_id = $2 AND attempt = $3)`,
				workflowID, p.GetActivityId(), p.GetAttempt()).Scan(&recorded)
			if err != nil {
				return false, fmt.Errorf("read the record of %s attempt %d: %w", activityType, p.GetAttempt(), err)
			}
			attempt = p.GetAttempt()
			return recorded, nil
		}
		return false, nil
	})
	return attempt, err
}

// dialTemporal connects a client to the stack's Temporal; the caller closes it.
func (s *Stack) dialTemporal() (client.Client, error) {
	tc, err := client.Dial(client.Options{HostPort: s.TemporalAddress(), Logger: logging.NewTemporal(zap.NewNop())})
	if err != nil {
		return nil, fmt.Errorf("dial temporal: %w", err)
	}
	return tc, nil
}
