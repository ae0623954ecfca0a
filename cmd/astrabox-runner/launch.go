package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cgroupFlags collects repeated -cgroup values.
type cgroupFlags []string

func (c *cgroupFlags) String() string     { return strings.Join(*c, ",") }
func (c *cgroupFlags) Set(v string) error { *c = append(*c, v); return nil }

// launch runs on the host as root: it starts bubblewrap in the box's cgroups
// (so every box process inherits the limits from its first instruction) and in a new user namespace that maps exactly two host accounts: the
// box's root is the runner's own account (-runner-uid) and the program's
// account (-uid) keeps its number. Nothing else of the host is mapped. The
// runner so runs as a different account from the programs it starts, with
// capabilities only inside that namespace. Doing this in a static helper avoids
// a shell and avoids racing a process that has already started. The launcher
// waits for bubblewrap and exits as it did, so the backend watches one process.
func launch(args []string) error {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	uid := fs.Int("uid", -1, "program uid (and gid)")
	runnerUID := fs.Int("runner-uid", -1, "host uid (and gid) of the box's root, which runs the runner")
	fds := fs.Int("fds", 0, "number of descriptors from 3 on to hand to bubblewrap")
	var cgroups cgroupFlags
	fs.Var(&cgroups, "cgroup", "cgroup directory to join (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if *uid <= 0 || *runnerUID <= 0 || *uid == *runnerUID || len(rest) == 0 {
		return errors.New("launch needs -uid, a different -runner-uid and a command")
	}
	path, err := exec.LookPath(rest[0])
	if err != nil {
		return fmt.Errorf("find %s: %w", rest[0], err)
	}
	cmd := exec.Command(path, rest[1:]...)
	cmd.Args = rest
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for fd := 3; fd < 3+*fds; fd++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
	}
	ids := func(inner, outer int) []syscall.SysProcIDMap {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: outer, Size: 1}, {ContainerID: inner, HostID: inner, Size: 1}}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: ids(*uid, *runnerUID),
		GidMappings: ids(*uid, *runnerUID),
		// The namespace is made by root, so the runner may clear its groups when
		// it starts a program.
		GidMappingsEnableSetgroups: true,
		// Root of the new namespace: bubblewrap keeps the capabilities it is
		// told to (--cap-add) for the runner and drops the rest.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
	}
	if err := startInCgroups(cmd, cgroups); err != nil {
		return fmt.Errorf("start %s: %w", path, err)
	}
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("wait for %s: %w", path, err)
	}
	return nil
}

// startInCgroups starts cmd inside the box's cgroups, so it is limited from its
// first instruction, while the launcher itself, which only waits, stays out of
// them and costs the box none of its pids or memory. A cgroup v2 box has one
// directory and the child is cloned straight into it; on cgroup v1 the
// launcher joins every hierarchy's box group, starts the child and moves back
// to each parent group, which holds no limits.
func startInCgroups(cmd *exec.Cmd, dirs []string) error {
	if len(dirs) == 1 {
		if _, err := os.Stat(filepath.Join(dirs[0], "cgroup.controllers")); err == nil {
			dir, err := os.Open(dirs[0])
			if err != nil {
				return fmt.Errorf("open cgroup %s: %w", dirs[0], err)
			}
			defer dir.Close()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
			return cmd.Start()
		}
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	for _, dir := range dirs {
		// The box runs by now: staying in a group only costs the box a little.
		if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), pid, 0); err != nil {
			fmt.Fprintf(os.Stderr, "astrabox-runner: leave cgroup %s: %v\n", dir, err)
		}
	}
	return nil
}
