package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/logging"
)

// globalFlags are shared by every subcommand; each names a config key with its
// dots written as dashes.
func addConfigFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML configuration file (or ASTRABOX_CONFIG)")
	fs.String("log-level", "", "log level: debug, info, warn, error")
	fs.String("log-format", "", "log format: console or json")
	fs.String("http-addr", "", "API listen address host:port")
	fs.String("temporal-address", "", "Temporal frontend host:port")
	fs.String("temporal-namespace", "", "Temporal namespace")
	fs.String("database-host", "", "PostgreSQL host")
	fs.Int("database-port", 0, "PostgreSQL port")
	fs.String("database-name", "", "PostgreSQL database")
	fs.String("database-user", "", "PostgreSQL user")
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "astrabox",
		Short:         "AstraBox runs coding-agent programs as 24/7 cloud agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addConfigFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return &usageError{errUnknownCommand(args[0])}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	root.AddCommand(
		newDevCommand(),
		newDevModelCommand(),
		newBenchCommand(),
		newServeCommand(),
		newWorkerCommand(),
		newMigrateCommand(),
		newTemporalCommand(),
		newVersionCommand(),
		newSessionsCommand(),
		newUsersCommand(),
		newTokensCommand(),
	)
	return root
}

// loadConfig reads the configuration for cmd, with defaults specific to it.
func loadConfig(cmd *cobra.Command, defaults map[string]any) (*config.Config, *zap.Logger, error) {
	file, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(config.Source{File: file, Flags: cmd.Flags(), Defaults: defaults})
	if err != nil {
		return nil, nil, err
	}
	log, err := logging.New(cfg.Log)
	if err != nil {
		return nil, nil, err
	}
	return cfg, log, nil
}
