package main

import (
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/loadbench"
)

func newBenchCommand() *cobra.Command {
	var opts loadbench.Options
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Start the whole stack from this checkout, load it through the public API and print each figure beside its floor",
		Long: `bench starts PostgreSQL, the Temporal dev server and separate API and worker
processes running real boxes with the scripted Agent program, drives them only
through the public API (Sessions, inputs whose replies stream deltas, SSE
followers) and, in a last phase, Sessions of the real Claude Code, measures
the floors of this machine in the same run, prints one table and stops
everything it started. It needs the checkout (make deps).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := zap.NewDevelopment(zap.IncreaseLevel(zap.InfoLevel))
			if err != nil {
				return err
			}
			defer log.Sync() //nolint:errcheck // nothing useful to do when flushing logs fails
			opts.Logger = log.Named("bench")
			return loadbench.Run(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&opts.Sessions, "sessions", []int{20, 100}, "Sessions of each phase")
	f.IntVar(&opts.Turns, "turns", 3, "measured inputs per Session")
	f.IntVar(&opts.Deltas, "deltas", 50, "text deltas each reply streams")
	f.DurationVar(&opts.Gap, "gap", 10*time.Millisecond, "time between a reply's deltas")
	f.IntVar(&opts.Followers, "followers", 10, "SSE followers per Session (at most --max-streams in a phase)")
	f.IntVar(&opts.MaxStreams, "max-streams", 200, "SSE streams a phase holds open at most")
	f.DurationVar(&opts.Timeout, "timeout", 20*time.Minute, "bound of the whole run")
	f.StringVar(&opts.ProfileDir, "profile-dir", "", "save CPU and allocation profiles of the API and worker taken in the largest phase here")
	f.IntVar(&opts.ProfileSeconds, "profile-seconds", 15, "length of the CPU profiles")
	f.DurationVar(&opts.IdleRelease, "idle-release", 45*time.Second, "the worker's sandbox.idle_release; each phase waits for every box's release and measures a released Session (outlast the slowest cold start)")
	f.IntVar(&opts.ClaudeSessions, "claude-sessions", 20, "Sessions of the real Claude Code whose time to first part is measured beside the program's own (0: none)")
	f.IntVar(&opts.Replicas, "replicas", 1, "API and worker processes each (1 or 2; with 2, Sessions are spread over both, and the last phases stop, then kill, a worker mid-reply)")
	return cmd
}
