package loadbench

import (
	"context"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/internal/telemetry"
)

// poolWaits are a set of processes' waits for a free database connection
// (go_sql_wait_count_total and go_sql_wait_duration_seconds_total, summed): beside
// the receipt they say how much of it queued for the API's pool rather than for
// PostgreSQL.
type poolWaits struct {
	count float64
	total time.Duration
}

// poolWaits sums the waits of the processes serving metrics at urls.
func (b *bench) poolWaits(ctx context.Context, urls []string) (poolWaits, error) {
	var sum poolWaits
	for _, url := range urls {
		count, err := scrapeDatabaseCounter(ctx, url, "go_sql_wait_count_total")
		if err != nil {
			return poolWaits{}, err
		}
		seconds, err := scrapeDatabaseCounter(ctx, url, "go_sql_wait_duration_seconds_total")
		if err != nil {
			return poolWaits{}, err
		}
		sum.count += count
		sum.total += time.Duration(seconds * float64(time.Second))
	}
	return sum, nil
}

// since is the waits that began after before was read.
func (w poolWaits) since(before poolWaits) poolWaits {
	return poolWaits{count: w.count - before.count, total: w.total - before.total}
}

// String is the waits' count, their time in all and each one's mean.
func (w poolWaits) String() string {
	if w.count == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f (%s in all, %s each)", w.count, msString(w.total), msString(time.Duration(float64(w.total)/w.count)))
}

// scrapeDatabaseCounter reads a counter of the platform's connection pool
// (db_name="astrabox") from a Prometheus endpoint.
func scrapeDatabaseCounter(ctx context.Context, url, name string) (float64, error) {
	family, err := scrapeFamily(ctx, url, name)
	if err != nil {
		return 0, err
	}
	for _, metric := range family.GetMetric() {
		if hasLabel(metric.GetLabel(), "db_name", telemetry.DatabaseName) && metric.GetCounter() != nil {
			return metric.GetCounter().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("scrape %s: no %s{db_name=%q}", url, name, telemetry.DatabaseName)
}
