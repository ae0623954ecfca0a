package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// runnerInBox is where the runner binary appears inside every box.
const runnerInBox = "/run/astrabox-runner"

// hostEtc are the host /etc entries a box built from the host's system
// directories needs: the dynamic loader's cache, name service, time zone,
// Debian's alternatives (awk, which, ... are symlinks into it) and CA roots.
// The whole host /etc is not shown: it would leak host settings and policy.
var hostEtc = []string{"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "hosts", "localtime",
	"alternatives", "ssl", "ca-certificates", "mime.types", "protocols", "services"}

// hostTop are the top-level entries of a merged-/usr host shown in the box.
var hostTop = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// runnerCaps are the capabilities the runner keeps, within the box's user
// namespace only: to start programs as the program account and to signal them.
// Programs start with none.
var runnerCaps = []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL"}

// bwrapArgs builds bubblewrap's arguments for a box. Order matters: every mount
// that creates a path in / comes before --remount-ro /. bubblewrap runs as the
// root of the user namespace the launcher made, so it makes no namespace of
// its own for users (one made by an unprivileged bubblewrap maps a single
// account, and the box needs two).
func bwrapArgs(o Options, rec record, dir, workspace string) []string {
	spec := rec.Spec
	a := []string{"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"}
	if spec.Network.Mode != sandbox.NetworkHost {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--new-session", "--cap-drop", "ALL")
	for _, c := range runnerCaps {
		a = append(a, "--cap-add", c)
	}
	a = append(a, "--hostname", rec.ID, "--clearenv")
	if spec.Image.Root == "" {
		a = append(a, "--ro-bind", "/usr", "/usr")
		for _, name := range hostTop {
			p := "/" + name
			if target, err := os.Readlink(p); err == nil {
				a = append(a, "--symlink", target, p)
			} else if st, err := os.Stat(p); err == nil && st.IsDir() {
				a = append(a, "--ro-bind", p, p)
			}
		}
		a = append(a, "--dir", "/etc")
		for _, name := range hostEtc {
			if _, err := os.Lstat("/etc/" + name); err == nil {
				a = append(a, "--ro-bind", "/etc/"+name, "/etc/"+name)
			}
		}
		a = append(a, "--ro-bind", filepath.Join(dir, "etc/passwd"), "/etc/passwd",
			"--ro-bind", filepath.Join(dir, "etc/group"), "/etc/group")
	} else {
		a = append(a, "--ro-bind", spec.Image.Root, "/")
		// The root is read-only, so only files the image has can be replaced.
		for _, name := range []string{"passwd", "group"} {
			if _, err := os.Stat(filepath.Join(spec.Image.Root, "etc", name)); err == nil {
				a = append(a, "--ro-bind", filepath.Join(dir, "etc", name), "/etc/"+name)
			}
		}
	}
	// /tmp and /dev/shm belong to the box's root (the runner's account), so
	// they are world-writable with the sticky bit, as on any host.
	a = append(a, "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc", "--perms", "1777")
	if spec.Limits.TmpBytes > 0 {
		a = append(a, "--size", strconv.FormatInt(spec.Limits.TmpBytes, 10))
	}
	a = append(a, "--tmpfs", "/tmp", "--tmpfs", "/run",
		"--bind", filepath.Join(dir, "control"), runnerapi.ControlDir,
		"--ro-bind", filepath.Join(dir, "egress"), runnerapi.EgressDir,
		"--ro-bind", o.RunnerPath, runnerInBox)
	if spec.Image.Root == "" {
		a = append(a, mountParents(spec)...)
	}
	for _, m := range spec.Mounts {
		a = append(a, "--ro-bind", m.Source, m.Target)
	}
	// /run only holds mount points: nothing in the box writes there.
	a = append(a, "--remount-ro", "/run")
	// The runner starts in / : the workspace is the program account's alone, and
	// the runner starts each process there as that account.
	a = append(a, "--bind", workspace, spec.Workspace.MountPath, "--chdir", "/",
		"--remount-ro", "/", "--json-status-fd", "3", "--seccomp", "5",
		"--", runnerInBox, "serve", "-config", runnerapi.ControlDir+"/"+runnerapi.ConfigName, "-ready-fd", "4")
	return a
}

// mountParents creates, world-traversable, the folders that lead to the box's
// mount points on a root made of the host's system folders. bubblewrap would
// make them itself, but private (0700) and owned by the box's root, which the
// program's account could then not traverse to reach its own program install
// or workspace.
func mountParents(spec sandbox.Spec) []string {
	targets := []string{spec.Workspace.MountPath}
	for _, m := range spec.Mounts {
		targets = append(targets, m.Target)
	}
	var a []string
	seen := map[string]bool{"/": true, "/usr": true, "/etc": true, "/dev": true, "/proc": true, "/tmp": true, "/run": true}
	for _, t := range targets {
		var parents []string
		for p := filepath.Dir(filepath.Clean(t)); !seen[p]; p = filepath.Dir(p) {
			seen[p] = true
			parents = append(parents, p)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			a = append(a, "--perms", "0755", "--dir", parents[i])
		}
	}
	return a
}

// checkImage refuses an image root that cannot hold the box's mount points,
// before anything starts.
func checkImage(spec sandbox.Spec) error {
	if spec.Image.Root == "" {
		return nil
	}
	st, err := os.Stat(spec.Image.Root)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("%w: image root %q is not a directory", sandbox.ErrInvalidSpec, spec.Image.Root)
	}
	need := []string{"dev", "proc", "tmp", "run", spec.Workspace.MountPath}
	for _, m := range spec.Mounts {
		need = append(need, m.Target)
	}
	for _, p := range need {
		if _, err := os.Stat(filepath.Join(spec.Image.Root, p)); err != nil {
			return fmt.Errorf("%w: image root %q lacks %s, needed as a mount point", sandbox.ErrInvalidSpec,
				spec.Image.Root, filepath.Join("/", p))
		}
	}
	return nil
}

// passwd and group files show the box's account by name.
func accountFiles(spec sandbox.Spec, uid int) (passwd, group string) {
	u := strconv.Itoa(uid)
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		spec.Identity.Account + ":x:" + u + ":" + u + ":" + spec.Identity.Account + ":" + spec.Identity.Home + ":/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\n" + spec.Identity.Account + ":x:" + u + ":\nnogroup:x:65534:\n"
	return passwd, group
}
