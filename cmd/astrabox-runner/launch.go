package main

import (
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

// launch runs on the host as root: it moves itself into the box's cgroups (so
// every box process inherits the limits from its first instruction), drops to
// the box's own uid and gid with no supplementary groups, and execs bubblewrap.
// Doing this in a static helper avoids a shell and avoids racing a process that
// has already started.
func launch(args []string) error {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	uid := fs.Int("uid", -1, "box uid")
	gid := fs.Int("gid", -1, "box gid")
	var cgroups cgroupFlags
	fs.Var(&cgroups, "cgroup", "cgroup directory to join (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if *uid <= 0 || *gid <= 0 || len(rest) == 0 {
		return fmt.Errorf("launch needs -uid, -gid and a command")
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, dir := range cgroups {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	path, err := exec.LookPath(rest[0])
	if err != nil {
		return fmt.Errorf("find %s: %w", rest[0], err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("clear groups: %w", err)
	}
	if err := syscall.Setgid(*gid); err != nil {
		return fmt.Errorf("setgid %d: %w", *gid, err)
	}
	if err := syscall.Setuid(*uid); err != nil {
		return fmt.Errorf("setuid %d: %w", *uid, err)
	}
	if err := syscall.Exec(path, rest, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}
