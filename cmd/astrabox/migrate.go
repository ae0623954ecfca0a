package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/astrabox/astrabox/store"
)

func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate up|down [steps]|status",
		Short: "Apply, roll back or list the database migrations embedded in this binary",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{fmt.Errorf("migrate needs one of up, down, status")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{fmt.Errorf("unknown migrate action %q: expected up, down or status", args[0])}
		},
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "up",
			Short: "Apply every pending migration",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withStore(cmd, func(ctx context.Context, st *store.Store) error {
					applied, err := st.MigrateUp(ctx)
					if err != nil {
						return err
					}
					if len(applied) == 0 {
						fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
					}
					for _, v := range applied {
						fmt.Fprintf(cmd.OutOrStdout(), "applied %d\n", v)
					}
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "down [steps]",
			Short: "Roll back the newest migrations (one by default)",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				steps := 1
				if len(args) == 1 {
					n, err := strconv.Atoi(args[0])
					if err != nil || n < 1 {
						return &usageError{fmt.Errorf("migrate down: steps must be a positive integer, got %q", args[0])}
					}
					steps = n
				}
				return withStore(cmd, func(ctx context.Context, st *store.Store) error {
					reverted, err := st.MigrateDown(ctx, steps)
					if err != nil {
						return err
					}
					for _, v := range reverted {
						fmt.Fprintf(cmd.OutOrStdout(), "reverted %d\n", v)
					}
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "status",
			Short: "List migrations and whether each is applied",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withStore(cmd, func(ctx context.Context, st *store.Store) error {
					status, err := st.MigrationStatus(ctx)
					if err != nil {
						return err
					}
					w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "VERSION\tNAME\tSTATE\tAPPLIED AT")
					for _, m := range status {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", m.Version, m.Name, migrationState(m), appliedAt(m))
					}
					return w.Flush()
				})
			},
		},
	)
	return cmd
}

func migrationState(m store.MigrationStatus) string {
	switch {
	case m.Missing:
		return "applied, unknown to this binary"
	case m.Modified:
		return "applied, modified since"
	case m.Applied:
		return "applied"
	}
	return "pending"
}

func appliedAt(m store.MigrationStatus) string {
	if m.AppliedAt == nil {
		return "-"
	}
	return m.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
}

// withStore loads the configuration, opens the store and runs fn.
func withStore(cmd *cobra.Command, fn func(context.Context, *store.Store) error) error {
	cfg, log, err := loadConfig(cmd, map[string]any{"log.format": "console", "log.level": "warn"})
	if err != nil {
		return err
	}
	st, err := openStore(cmd.Context(), cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(cmd.Context(), st)
}

// requireCurrentSchema refuses to serve on a database whose schema lacks a
// migration this binary has: the code would fail on the first query instead.
func (p *platform) requireCurrentSchema(ctx context.Context) error {
	status, err := p.store.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("read migration status: %w", err)
	}
	for _, m := range status {
		if !m.Applied {
			return fmt.Errorf("database schema is behind this binary (migration %d %s is pending): run `astrabox migrate up`", m.Version, m.Name)
		}
	}
	return nil
}
