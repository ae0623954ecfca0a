// Command soak runs the platform as separate processes (internal/faultstack),
// takes Sessions through turns with replies of varied length, commands and
// approvals while it injects a random fault every few seconds, and prints
// what the audit found. `make soak` runs it; docs/reliability.md explains the
// figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/faultstack"
	"github.com/astrabox/astrabox/internal/faultstack/soak"
)

func main() {
	var opts soak.Options
	var faults string
	var idleRelease time.Duration
	flag.IntVar(&opts.Sessions, "sessions", 3, "Sessions run side by side (S)")
	flag.IntVar(&opts.Turns, "turns", 3, "turns per Session (T)")
	flag.DurationVar(&opts.FaultEvery, "fault-every", 20*time.Second, "pause between the recovery from one fault and the next (F)")
	flag.DurationVar(&opts.Duration, "duration", 15*time.Minute, "bound on the turns")
	flag.StringVar(&faults, "faults", strings.Join(soak.AllFaults, ","), "fault kinds to draw from")
	flag.Uint64Var(&opts.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the turn and fault choices")
	flag.DurationVar(&idleRelease, "idle-release", 0, "the workers' sandbox.idle_release: a box quiet this long is released and its Session's run ends (0: the default)")
	flag.DurationVar(&opts.TurnPause, "turn-pause", 0, "a Session waits a drawn time below this after each turn (with -idle-release shorter, some turns start on a released Session)")
	flag.Parse()
	opts.Faults = strings.Split(faults, ",")
	opts.Log = os.Stderr
	if err := run(opts, idleRelease); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(opts soak.Options, idleRelease time.Duration) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "soak: %d sessions x %d turns, a fault every %s from %v, seed %d\n", opts.Sessions, opts.Turns, opts.FaultEvery, opts.Faults, opts.Seed)
	checker, err := faultstack.NewChecker()
	if err != nil {
		return err
	}
	var stackOpts faultstack.Options
	if idleRelease > 0 {
		stackOpts.RoleEnv = func(role string) []string {
			if role == "worker" {
				return []string{"ASTRABOX_SANDBOX_IDLE_RELEASE=" + idleRelease.String()}
			}
			return nil
		}
	}
	s, err := faultstack.Start(ctx, stackOpts)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if closeErr := s.Close(closeCtx); closeErr != nil {
			err = fmt.Errorf("stop the stack: %w", closeErr)
		}
	}()
	report, err := soak.Run(ctx, s, checker, opts)
	if report != nil {
		report.Print(os.Stdout)
	}
	if err != nil {
		return err
	}
	return report.Err()
}
