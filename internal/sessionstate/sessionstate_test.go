package sessionstate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDeriveTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		f    Facts
		want State
	}{
		{"new session", Facts{Lifecycle: LifecycleCreating}, Creating},
		{"message held while creating", Facts{Lifecycle: LifecycleCreating, HeldInputs: 1}, Creating},
		{"ready, no report yet", Facts{Lifecycle: LifecycleActive}, Ready},
		{"ready, idle", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeIdle}, Ready},
		{"held input", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeIdle, HeldInputs: 1}, Processing},
		{"open response while idle report lags", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeIdle, OpenResponses: 1}, Processing},
		{"working on its own", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeWorking}, Processing},
		{"paused on approval", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeWaiting, OpenResponses: 1, OpenInteractions: 1}, WaitingInput},
		{"paused with held messages", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeWaiting, OpenResponses: 1, OpenInteractions: 1, HeldInputs: 3}, WaitingInput},
		{"interaction open before status report", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeWorking, OpenResponses: 1, OpenInteractions: 1}, WaitingInput},
		{"program reports waiting", Facts{Lifecycle: LifecycleActive, RuntimeStatus: RuntimeWaiting}, WaitingInput},
		{"terminated with leftovers", Facts{Lifecycle: LifecycleTerminated, RuntimeStatus: RuntimeWorking, OpenResponses: 1, HeldInputs: 1}, Terminated},
		{"deleted", Facts{Lifecycle: LifecycleDeleted, Deleted: true}, Deleted},
		{"deleted_at wins", Facts{Lifecycle: LifecycleActive, Deleted: true, RuntimeStatus: RuntimeWorking}, Deleted},
		{"unknown lifecycle reads as active", Facts{Lifecycle: "paused", RuntimeStatus: RuntimeWorking}, Processing},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Derive(tc.f), tc.name)
	}
}

// TestDeriveEveryCombination walks every combination of the facts and checks the
// rules the Sessions documents state, each independently of Derive's precedence.
func TestDeriveEveryCombination(t *testing.T) {
	t.Parallel()
	lifecycles := []string{LifecycleCreating, LifecycleActive, LifecycleTerminated, LifecycleDeleted}
	statuses := []string{"", RuntimeIdle, RuntimeWorking, RuntimeWaiting}
	counts := []int{0, 1, 2}
	seen := map[State]int{}
	n := 0
	for _, lc := range lifecycles {
		for _, deleted := range []bool{false, true} {
			for _, st := range statuses {
				for _, resp := range counts {
					for _, inter := range counts {
						for _, held := range counts {
							f := Facts{Lifecycle: lc, Deleted: deleted, RuntimeStatus: st, OpenResponses: resp, OpenInteractions: inter, HeldInputs: held}
							got := Derive(f)
							seen[got]++
							n++
							desc := fmt.Sprintf("%+v -> %s", f, got)
							if deleted || lc == LifecycleDeleted {
								assert.Equal(t, Deleted, got, desc)
								continue
							}
							switch lc {
							case LifecycleTerminated:
								assert.Equal(t, Terminated, got, desc)
							case LifecycleCreating:
								assert.Equal(t, Creating, got, desc)
							case LifecycleActive:
								busy := st == RuntimeWorking || resp > 0 || held > 0
								waiting := inter > 0 || st == RuntimeWaiting
								switch got {
								case Ready:
									assert.False(t, busy || waiting, "READY with work in hand: %s", desc)
								case Processing:
									assert.True(t, busy, desc)
									assert.False(t, waiting, desc)
								case WaitingInput:
									assert.True(t, waiting, desc)
								default:
									t.Errorf("active session derived %s", desc)
								}
							}
							assert.Equal(t, got != Terminated && got != Deleted, got.AcceptsInput(), desc)
						}
					}
				}
			}
		}
	}
	assert.Equal(t, 4*2*4*3*3*3, n)
	for _, s := range []State{Creating, Ready, Processing, WaitingInput, Terminated, Deleted} {
		assert.Positive(t, seen[s], "state %s is reachable", s)
	}
}
