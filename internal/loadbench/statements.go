package loadbench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statementSettings load pg_stat_statements into the stack's cluster. Each statement
// the platform sends is a round trip, and PostgreSQL's CPU beside the statements'
// execution goes per round trip, so the statements a turn costs is the figure a
// change to the platform's round trips moves; unlike a latency it is not moved by the
// machine's neighbours. Only top-level statements are counted.
func statementSettings() map[string]string {
	return map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top"}
}

// clusterSettings are every setting the bench starts the stack's cluster with.
func clusterSettings() map[string]string {
	settings := lockWaitSettings()
	maps.Copy(settings, statementSettings())
	return settings
}

// countStatements makes pg_stat_statements readable in the cluster at dsn's database
// (the stack's migrations do not create it; it is the bench's alone).
func countStatements(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("count the cluster's statements: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("count the cluster's statements: %w", err)
	}
	// The extension is created whether or not the library is loaded; only a read
	// says it counts.
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM pg_stat_statements"); err != nil {
		return fmt.Errorf("count the cluster's statements (shared_preload_libraries must name pg_stat_statements): %w", err)
	}
	return nil
}

// statementCounts are how many times each statement ran, by its normalised text.
type statementCounts map[string]int64

// readStatementCounts reads the counts of the statements run in dsn's database,
// leaving out the bench's own reads of them.
func readStatementCounts(ctx context.Context, dsn string) (statementCounts, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("read the cluster's statement counts: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT query, sum(calls)::bigint FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND query NOT LIKE '%pg_stat_statements%' GROUP BY query`)
	if err != nil {
		return nil, fmt.Errorf("read the cluster's statement counts: %w", err)
	}
	counts := statementCounts{}
	var query string
	var calls int64
	_, err = pgx.ForEachRow(rows, []any{&query, &calls}, func() error {
		counts[query] += calls
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the cluster's statement counts: %w", err)
	}
	return counts, nil
}

// since is what ran after before was read.
func (c statementCounts) since(before statementCounts) statementCounts {
	out := statementCounts{}
	for query, calls := range c {
		if n := calls - before[query]; n > 0 {
			out[query] = n
		}
	}
	return out
}

// statementsShown is how many of the most frequent statements the report names.
const statementsShown = 4

// perTurn says how many statements ran a turn, and the most frequent of them by
// their opening: "9.3 (BEGIN 1.0, COMMIT 1.0, WITH b AS (...) 2.5, ...)".
func (c statementCounts) perTurn(turns int) string {
	if turns <= 0 || len(c) == 0 {
		return "none"
	}
	byOpening := map[string]int64{}
	var total int64
	for query, calls := range c {
		byOpening[statementOpening(query)] += calls
		total += calls
	}
	openings := slices.Collect(maps.Keys(byOpening))
	slices.SortFunc(openings, func(a, b string) int {
		if d := cmp.Compare(byOpening[b], byOpening[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	named := make([]string, 0, statementsShown)
	for _, opening := range openings[:min(len(openings), statementsShown)] {
		named = append(named, fmt.Sprintf("%s %.1f", opening, float64(byOpening[opening])/float64(turns)))
	}
	return fmt.Sprintf("%.1f (most often: %s)", float64(total)/float64(turns), strings.Join(named, "; "))
}

// table lists every statement that ran, most often first, with how many times it ran
// a turn: "12.0\tWITH b AS (...)", its text on one line.
func (c statementCounts) table(turns int) string {
	queries := slices.Collect(maps.Keys(c))
	slices.SortFunc(queries, func(a, b string) int {
		if d := cmp.Compare(c[b], c[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var out strings.Builder
	for _, query := range queries {
		fmt.Fprintf(&out, "%.2f\t%s\n", float64(c[query])/float64(max(turns, 1)), strings.Join(strings.Fields(query), " "))
	}
	return out.String()
}

// statementOpening is a statement's first few words, its spaces collapsed: enough to
// tell the platform's statements apart in a report line.
func statementOpening(query string) string {
	words := strings.Fields(query)
	whole := strings.Join(words, " ")
	opening := strings.Join(words[:min(len(words), 6)], " ")
	if len(opening) > 48 {
		opening = opening[:48]
	}
	if opening != whole {
		opening += " ..."
	}
	return opening
}
