package loadbench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stretch of a cluster's log as PostgreSQL writes it with log_lock_waits on: each
// wait is logged once it outlasts deadlock_timeout and again, with its length, once
// granted; a statement may start on the line after STATEMENT.
const lockWaitLog = `2026-12-07 16:44:39.259 UTC [30924] LOG:  process 30924 still waiting for ShareLock on transaction 11864 after 10.040 ms
2026-12-07 16:44:39.259 UTC [30924] DETAIL:  Process holding the lock: 30925. Wait queue: 30924.
2026-12-07 16:44:39.259 UTC [30924] CONTEXT:  while updating tuple (28,21) in relation "sessions"
2026-12-07 16:44:39.259 UTC [30924] STATEMENT:  
	WITH advanced AS (
		UPDATE sessions SET input_seq = input_seq + 1, updated_at = now()
2026-12-07 16:44:39.363 UTC [30924] LOG:  process 30924 acquired ShareLock on transaction 11864 after 107.827 ms
2026-12-07 16:44:39.363 UTC [30924] CONTEXT:  while updating tuple (28,21) in relation "sessions"
2026-12-07 16:44:39.363 UTC [30924] STATEMENT:  
	WITH advanced AS (
		UPDATE sessions SET input_seq = input_seq + 1, updated_at = now()
2026-12-07 16:44:39.410 UTC [30925] LOG:  process 30925 acquired ShareLock on transaction 11881 after 46.514 ms
2026-12-07 16:44:39.410 UTC [30925] CONTEXT:  while updating tuple (3,9) in relation "inputs"
2026-12-07 16:44:39.410 UTC [30925] STATEMENT:  UPDATE "inputs" SET "delivered_at"=now(),"state"=$1 WHERE id = $2
2026-12-07 16:44:39.420 UTC [30926] LOG:  process 30926 acquired AccessExclusiveLock on object 0 of class 1262 of database 0 after 12.500 ms
2026-12-07 16:44:39.420 UTC [30926] STATEMENT:  commit
2026-12-07 16:44:39.430 UTC [30927] LOG:  process 30927 acquired ExclusiveLock on tuple (20,44) of relation 16403 of database 16384 after 11.000 ms
2026-12-07 16:44:39.430 UTC [30927] STATEMENT:  
	WITH advanced AS (
2026-12-07 16:44:39.440 UTC [30928] LOG:  process 30928 acquired ExclusiveLock on extension of relation 16809 of database 16384 after 20.000 ms
2026-12-07 16:44:39.440 UTC [30928] STATEMENT:  VACUUM
2026-12-07 16:44:39.450 UTC [30929] LOG:  checkpoint starting: time
`

func TestLockWaitsAreCountedByWhatWaited(t *testing.T) {
	waits := parseLockWaits(lockWaitLog)
	assert.Equal(t, lockWaits{
		"input receipts":         {count: 2, total: 118827 * time.Microsecond},
		"input delivery records": {count: 1, total: 46514 * time.Microsecond},
		"the notify queue":       {count: 1, total: 12500 * time.Microsecond},
		"other":                  {count: 1, total: 20 * time.Millisecond},
	}, waits, "a wait is counted once it is granted, by its statement or the notify queue's lock")
	assert.Equal(t, "input receipts 2 (118.8 ms in all), input delivery records 1 (46.5 ms in all), other 1 (20.0 ms in all), the notify queue 1 (12.5 ms in all)", waits.String())
	assert.Equal(t, "none", lockWaits{}.String())
}

func TestLockWaitsAreReadFromTheMeasuredStretchOfTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postgres.log")
	empty, err := logSize(path)
	require.NoError(t, err, "a log not written yet is empty")
	require.Equal(t, logSpan{}, empty)

	before := "2026-12-07 16:44:38.000 UTC [30900] LOG:  process 30900 acquired ShareLock on transaction 1 after 500.000 ms\n" +
		"2026-12-07 16:44:38.000 UTC [30900] STATEMENT:  \n\tWITH advanced AS (\n"
	require.NoError(t, os.WriteFile(path, []byte(before), 0o644))
	start, err := logSize(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(lockWaitLog)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	end, err := logSize(path)
	require.NoError(t, err)

	waits, err := readLockWaits(path, end.since(start))
	require.NoError(t, err)
	assert.Equal(t, 2, waits["input receipts"].count, "the wait logged before the stretch is not counted")
	none, err := readLockWaits(path, end.since(end))
	require.NoError(t, err)
	assert.Empty(t, none)
}
