package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// requiredCommandsScript prints each of its arguments the box cannot run: a name not
// found on the box's PATH, or a path that is not an executable file.
const requiredCommandsScript = `for c in "$@"; do command -v "$c" >/dev/null 2>&1 || echo "$c"; done`

// boxShell is the shell the check runs in, named by its path: the box runner looks a
// bare name up on its own PATH, not the box's. The box's environment (SHELL) names it.
const boxShell = "/bin/sh"

// requiredCommandsTimeout bounds the check; it runs one shell built-in per command.
const requiredCommandsTimeout = 30 * time.Second

// checkRequiredCommands fails activation, before the program starts, when the box
// lacks a command the engine declares in Workload.RequiredCommands. The failure is a
// non-retryable Configuration error, and its reason is recorded on the Session so its
// owner sees why the program did not start: the image, not a retry, has to change.
func (a *Activities) checkRequiredCommands(ctx context.Context, h sandbox.Handle, sessionID string, caps engines.EngineRuntimeCapabilities) error {
	cmds := caps.Workload.RequiredCommands
	if len(cmds) == 0 {
		return nil
	}
	argv := append([]string{boxShell, "-c", requiredCommandsScript, "sh"}, cmds...)
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: requiredCommandsTimeout})
	if err != nil {
		return fmt.Errorf("check required commands: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("check required commands: exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	missing := strings.Fields(string(res.Stdout))
	if len(missing) == 0 {
		return nil
	}
	reason := fmt.Sprintf("the Agent program %s cannot start: its box lacks the required command(s) %s; the runtime image must provide them",
		caps.EngineKind, strings.Join(missing, ", "))
	if err := a.deps.Store.SetSessionRuntimeError(ctx, sessionID, reason); err != nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(reason, ErrTypeConfiguration, nil)
}
