package loadbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// samples is a set of measured durations.
type samples []time.Duration

// pct is the p-th percentile (0-100), zero for no samples.
func (s samples) pct(p int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// Row is one line of the report: a figure, its goal, what was measured, the floor
// measured in the same run and the ratio of the two (1 is as good as the floor;
// for a rate measured/floor, for a latency floor/measured).
type Row struct {
	Figure string
	Goal   string
	P50    string
	P99    string
	Floor  string
	Ratio  float64
	// Met says whether the goal is met; unknown when the goal is only reported.
	Met *bool
}

// Report is the load generator's result.
type Report struct {
	// Load describes the machine's load while it ran (loadavg before and after).
	Load string
	// CPU says, per phase, how many cores each part of the machine used.
	CPU  []string
	Rows []Row
}

// Print writes the table.
func (r Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tgoal\tp50\tp99\tfloor\tratio\tmet")
	for _, row := range r.Rows {
		ratio := "-"
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", row.Ratio)
		}
		met := "-"
		if row.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*row.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Figure, row.Goal, dash(row.P50), dash(row.P99), dash(row.Floor), ratio, met)
	}
	tw.Flush()
	for _, line := range r.CPU {
		fmt.Fprintln(w, line)
	}
	if r.Load != "" {
		fmt.Fprintf(w, "machine load: %s\n", r.Load)
	}
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func msString(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// pctString is a percentile of samples that may be empty: "none recorded" when no
// event of its kind was (an input the runtime admitted before its delivery record
// has none), where the percentile of nothing would print as a time of zero.
func pctString(s samples, p int) string {
	if len(s) == 0 {
		return "none recorded"
	}
	return msString(s.pct(p))
}

func rateString(r float64) string { return fmt.Sprintf("%.0f/s", r) }

func met(ok bool) *bool { return &ok }

// latencyRatio is floor/measured, capped at 1 (a figure at its floor).
func latencyRatio(floor, measured time.Duration) float64 {
	if measured <= 0 || floor <= 0 {
		return 0
	}
	return min(1, float64(floor)/float64(measured))
}
