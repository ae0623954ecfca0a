package soak

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/faultstack"
)

// Report holds a soak's figures.
type Report struct {
	mu sync.Mutex

	// InputsAccepted counts receipts the API returned during the turns.
	InputsAccepted int
	// The audit of every Session (soak Sessions and the probe).
	AuditedInputs, AnsweredOnce, Lost, AnsweredTwice, Held int
	// RepeatedOrMissingParts counts live or replayed streams whose seqs
	// repeated or skipped, or that the ai client rejected.
	RepeatedOrMissingParts int
	// WrongText counts live replies whose text was not the scripted reply.
	WrongText int
	// WithoutOutcome counts responses the audit found open at the end.
	WithoutOutcome int
	// Terminated counts Sessions TERMINATED at the end.
	Terminated int
	// Outcomes counts responses by outcome.
	Outcomes map[string]int
	// Faults counts injected faults by kind, Unrecovered those after which
	// the probe message was not answered within the turn timeout.
	Faults, Unrecovered map[string]int
	// Recovery are the times from a fault's injection to the probe's answer.
	Recovery []time.Duration
	// Notes are the individual problems, in order.
	Notes []string
	// Crashes names platform processes that exited on their own.
	Crashes error
	Elapsed time.Duration
}

func newReport() *Report {
	return &Report{Outcomes: map[string]int{}, Faults: map[string]int{}, Unrecovered: map[string]int{}}
}

func (r *Report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Report) accepted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.InputsAccepted++
}

func (r *Report) sequenceProblem() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.RepeatedOrMissingParts++
}

func (r *Report) wrongText() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.WrongText++
}

func (r *Report) fault(kind string, recovery time.Duration, recovered bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Faults[kind]++
	if !recovered {
		r.Unrecovered[kind]++
		return
	}
	r.Recovery = append(r.Recovery, recovery)
}

func (r *Report) addAudit(a faultstack.Audit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.AuditedInputs += a.Inputs
	r.AnsweredOnce += a.Answered
	r.AnsweredTwice += a.AnsweredTwice
	r.Lost += a.Lost
	r.Held += a.Held
	r.WithoutOutcome += a.Unfinished
	r.RepeatedOrMissingParts += len(a.StreamProblems)
	for k, v := range a.Outcomes {
		r.Outcomes[k] += v
	}
	if a.State == faultstack.StateTerminated {
		r.Terminated++
	}
	for _, p := range a.StreamProblems {
		r.Notes = append(r.Notes, "session "+a.SessionID+": "+p)
	}
}

// Err reports whether the soak found a broken promise: an input lost or
// answered twice, a repeated or missing part, a wrong reply, a response
// without an outcome, a TERMINATED Session, a fault not recovered from, or a
// platform process that crashed.
func (r *Report) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	unrecovered := 0
	for _, n := range r.Unrecovered {
		unrecovered += n
	}
	if r.Lost+r.AnsweredTwice+r.RepeatedOrMissingParts+r.WrongText+r.WithoutOutcome+r.Terminated+unrecovered > 0 || r.Crashes != nil {
		return errors.New("the soak found broken promises (see the figures)")
	}
	return nil
}

// Percentile returns the p-th percentile (0..100) of the recovery times.
func (r *Report) Percentile(p float64) time.Duration {
	if len(r.Recovery) == 0 {
		return 0
	}
	sorted := slices.Clone(r.Recovery)
	slices.Sort(sorted)
	// Nearest rank: the smallest time at or above p percent of the samples.
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// Print writes the figures.
func (r *Report) Print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "soak finished in %s\n", r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "inputs accepted            %d\n", r.InputsAccepted)
	fmt.Fprintf(w, "inputs recorded (audit)    %d\n", r.AuditedInputs)
	fmt.Fprintf(w, "answered exactly once      %d\n", r.AnsweredOnce)
	fmt.Fprintf(w, "lost (never answered)      %d (still held: %d)\n", r.Lost, r.Held)
	fmt.Fprintf(w, "answered twice             %d\n", r.AnsweredTwice)
	fmt.Fprintf(w, "repeated or missing parts  %d\n", r.RepeatedOrMissingParts)
	fmt.Fprintf(w, "wrong reply text           %d\n", r.WrongText)
	fmt.Fprintf(w, "responses without outcome  %d\n", r.WithoutOutcome)
	fmt.Fprintf(w, "sessions TERMINATED        %d\n", r.Terminated)
	fmt.Fprintf(w, "response outcomes          %s\n", sortedCounts(r.Outcomes))
	fmt.Fprintf(w, "faults injected            %s\n", sortedCounts(r.Faults))
	fmt.Fprintf(w, "faults not recovered       %s\n", sortedCounts(r.Unrecovered))
	fmt.Fprintf(w, "recovery p50 / p99         %s / %s (%d measured)\n", r.Percentile(50).Round(time.Millisecond), r.Percentile(99).Round(time.Millisecond), len(r.Recovery))
	if r.Crashes != nil {
		fmt.Fprintf(w, "platform crashes           %v\n", r.Crashes)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf("%s=%d ", k, m[k])
	}
	if out == "" {
		return "none"
	}
	return out
}
