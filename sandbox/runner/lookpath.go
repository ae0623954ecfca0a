package runner

import (
	"os/exec"
	"path/filepath"
	"strings"
)

// inEnvPath makes cmd, made for a program named without a slash, run the program
// found on the PATH of env, the environment it starts with. exec.Command looks in
// the runner's own PATH, which is empty in a local box (bubblewrap clears the
// environment; the box's PATH is in the boot configuration), so a program named
// only by its command, as an image puts it on PATH, would not be found. Call it
// as the program's account: the lookup is by what that account may execute.
func inEnvPath(cmd *exec.Cmd, name string, env []string) *exec.Cmd {
	if strings.Contains(name, "/") {
		return cmd
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		// For a path, LookPath checks only that it is a file the caller may execute.
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			cmd.Path, cmd.Err = p, nil
			return cmd
		}
	}
	return cmd
}
