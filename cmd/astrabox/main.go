// Command astrabox is the AstraBox platform binary: the API server (serve), the
// Temporal worker (worker), database migrations (migrate), the all-in-one local
// stack (dev) and its scripted model server (devmodel).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/config"
)

// Exit codes: 2 for configuration and usage problems (fix the input and retry),
// 1 for everything else.
const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	// Gin's mode is process-wide; release mode keeps its debug banner out of the logs.
	gin.SetMode(gin.ReleaseMode)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := newRootCommand()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "astrabox:", err)
	var usage *usageError
	if config.IsConfigError(err) || errors.As(err, &usage) {
		os.Exit(exitUsage)
	}
	os.Exit(exitFailure)
}

// usageError marks a command-line mistake (unknown subcommand, bad argument).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
