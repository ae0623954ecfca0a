package loadbench

import (
	"context"
	"path/filepath"

	"github.com/astrabox/astrabox/internal/telemetry"
)

// scrapedFigures are the processes' metrics the bench reads before and after the
// measured turns, to report what the turns added. Beside event-to-part, the Relay's
// lag splits a part's way into the program's and its runner's (before the Relay read
// it) and the platform's (the Relay's batch and its group's commit); the admissions'
// lag and the session log's mirror split the first part's; the pools' waits say how
// much of the API's and the workers' statements queued for a connection; the
// cluster's log says what waited on a lock there, and its pg_stat_statements what
// statements ran.
type scrapedFigures struct {
	relayLag, admissionLag, mirror histogram
	apiWaits, workerWaits          poolWaits
	pgLog                          logSpan
	statements                     statementCounts
}

// scrapeFigures reads them from the workers' and the API processes' /metrics and
// from the cluster.
func (b *bench) scrapeFigures(ctx context.Context) (scrapedFigures, error) {
	var f scrapedFigures
	var err error
	if f.relayLag, err = b.workerHistogram(ctx, telemetry.MetricRelayLag, "", ""); err != nil {
		return f, err
	}
	if f.admissionLag, err = b.workerHistogram(ctx, telemetry.MetricRelayLag, "batch", telemetry.RelayBatchAdmission); err != nil {
		return f, err
	}
	if f.mirror, err = b.workerHistogram(ctx, telemetry.MetricSessionLogMirror, "", ""); err != nil {
		return f, err
	}
	if f.apiWaits, err = b.poolWaits(ctx, b.apiMetrics); err != nil {
		return f, err
	}
	if f.workerWaits, err = b.poolWaits(ctx, b.workerMetrics); err != nil {
		return f, err
	}
	if f.pgLog, err = logSize(b.pgLogPath()); err != nil {
		return f, err
	}
	f.statements, err = readStatementCounts(ctx, b.stack.DSN())
	return f, err
}

// pgLogPath is the stack's cluster's log.
func (b *bench) pgLogPath() string { return filepath.Join(b.stack.LogDir(), "postgres.log") }

// since is what was observed after before was read.
func (f scrapedFigures) since(before scrapedFigures) scrapedFigures {
	return scrapedFigures{
		relayLag:     f.relayLag.since(before.relayLag),
		admissionLag: f.admissionLag.since(before.admissionLag),
		mirror:       f.mirror.since(before.mirror),
		apiWaits:     f.apiWaits.since(before.apiWaits),
		workerWaits:  f.workerWaits.since(before.workerWaits),
		pgLog:        f.pgLog.since(before.pgLog),
		statements:   f.statements.since(before.statements),
	}
}
