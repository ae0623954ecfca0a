package loadbench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockWaitLogged is the stack cluster's deadlock_timeout in the bench. With
// log_lock_waits on, PostgreSQL logs every lock wait that lasts longer, and how long
// it waited once the lock is granted: the bench reports what waited during the
// measured turns. (An input's receipt waiting on its Session's row behind the Relays'
// writes was found this way.)
const lockWaitLogged = 10 * time.Millisecond

// lockWaitSettings are the cluster settings that log the waits.
func lockWaitSettings() map[string]string {
	return map[string]string{"log_lock_waits": "on", "deadlock_timeout": strconv.FormatInt(lockWaitLogged.Milliseconds(), 10) + "ms"}
}

// checkLockWaitsLogged makes sure the cluster at dsn runs with lockWaitSettings, so
// that "none" in the report means no wait, not an unlogged one.
func checkLockWaitsLogged(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("check the cluster's lock wait logging: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for name, value := range lockWaitSettings() {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
			return fmt.Errorf("check the cluster's %s: %w", name, err)
		}
		if got != value {
			return fmt.Errorf("the cluster runs with %s = %s, not %s: its lock waits are not reported", name, got, value)
		}
	}
	return nil
}

// logSpan is a stretch of the cluster's log: the bytes written between two readings
// of its size (a reading is the span from its size to its size).
type logSpan struct{ from, to int64 }

// logSize reads the size of the log at path; a log not written yet is empty.
func logSize(path string) (logSpan, error) {
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return logSpan{}, nil
	}
	if err != nil {
		return logSpan{}, fmt.Errorf("read the cluster's log size: %w", err)
	}
	return logSpan{from: info.Size(), to: info.Size()}, nil
}

// since is the stretch written after before was read.
func (s logSpan) since(before logSpan) logSpan { return logSpan{from: before.to, to: s.to} }

// lockWaitSum is how many waits of one kind were logged and how long they took.
type lockWaitSum struct {
	count int
	total time.Duration
}

// lockWaits are the logged waits by what waited.
type lockWaits map[string]lockWaitSum

// readLockWaits reads the waits the cluster logged in span of the log at path.
func readLockWaits(path string, span logSpan) (lockWaits, error) {
	if span.to <= span.from {
		return lockWaits{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the cluster's log: %w", err)
	}
	defer f.Close()
	text := make([]byte, span.to-span.from)
	if _, err := f.ReadAt(text, span.from); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read the cluster's log: %w", err)
	}
	return parseLockWaits(string(text)), nil
}

// parseLockWaits finds PostgreSQL's "process N acquired <lock> on <object> after X
// ms" messages and names each by its waiter: the message's STATEMENT (the lines
// after it; a statement that starts with a line break goes on to the next lines),
// or the notify queue's lock, which every notifying commit takes in turn.
func parseLockWaits(log string) lockWaits {
	waits := lockWaits{}
	lines := strings.Split(log, "\n")
	for i, line := range lines {
		_, message, found := strings.Cut(line, " LOG:  process ")
		if !found || !strings.Contains(message, " acquired ") {
			continue
		}
		_, waited, found := cutLast(message, " after ")
		ms, err := strconv.ParseFloat(strings.TrimSuffix(waited, " ms"), 64)
		if !found || err != nil {
			continue
		}
		kind := "the notify queue"
		if !strings.Contains(message, "on object 0 of class 1262") {
			kind = waiterKind(statementOf(lines[i+1:]))
		}
		sum := waits[kind]
		sum.count++
		sum.total += time.Duration(ms * float64(time.Millisecond))
		waits[kind] = sum
	}
	return waits
}

// cutLast is strings.Cut at the last sep in s.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// statementOf is the statement of the message whose following lines are lines: the
// text of its STATEMENT line, or the first non-empty line after it.
func statementOf(lines []string) string {
	for i, line := range lines[:min(len(lines), 4)] {
		_, statement, found := strings.Cut(line, " STATEMENT:  ")
		if !found {
			continue
		}
		for _, next := range lines[i+1:] {
			if statement = strings.TrimSpace(statement); statement != "" {
				break
			}
			statement = next
		}
		return statement
	}
	return ""
}

// waiterKind names the platform's statement by its opening: an input's receipt, a
// Relay's batch (its parts' statements or its group's locks), a record of an input's
// delivery; anything else is "other".
func waiterKind(statement string) string {
	switch {
	case strings.HasPrefix(statement, "WITH advanced AS"):
		return "input receipts"
	case strings.HasPrefix(statement, "WITH b AS"), strings.HasPrefix(statement, "WITH lease AS"),
		strings.HasPrefix(statement, "SELECT l.session_id::text, l.generation"):
		return "Relay batches"
	case strings.HasPrefix(statement, `UPDATE "inputs" SET "delivered_at"`):
		return "input delivery records"
	}
	return "other"
}

// String lists the kinds, most time first: "input receipts 3 (91 ms in all), ...".
func (w lockWaits) String() string {
	if len(w) == 0 {
		return "none"
	}
	kinds := make([]string, 0, len(w))
	for kind := range w {
		kinds = append(kinds, kind)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if c := cmp.Compare(w[b].total, w[a].total); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(kinds))
	for i, kind := range kinds {
		parts[i] = fmt.Sprintf("%s %d (%s in all)", kind, w[kind].count, msString(w[kind].total))
	}
	return strings.Join(parts, ", ")
}
