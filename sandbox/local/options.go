package local

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
)

// Options configures the local backend. The zero value of every field except
// StateDir has a working default.
type Options struct {
	// StateDir holds every box's files (workspace, control folder, journals,
	// records) and persistent volumes. A restarted worker given the same StateDir
	// finds its running boxes again. Required.
	StateDir string
	// UIDFirst and UIDCount are the host uids (and gids, same numbers) handed out
	// one per box. They must not belong to existing accounts. Default 200000 and
	// 10000.
	UIDFirst, UIDCount int
	// RunnerPath is the static astrabox-runner binary bound into every box.
	// Default: astrabox-runner next to the running executable, then on PATH.
	RunnerPath string
	// BwrapPath is the bubblewrap binary. Default: bwrap on PATH.
	BwrapPath string
	// DefaultLimits apply where a Spec leaves a limit at zero.
	DefaultLimits sandbox.Limits
	// Egress is where each declared forward leads, by name, with the credential
	// headers the host adds. Each box with forwards gets its own forwarder
	// process (RunnerPath egress) serving a unix socket per name, owned by the
	// box's uid; it outlives the worker, so a worker restart does not break the
	// model streams in flight. A Spec that forwards a name missing here is refused.
	Egress map[string]egress.Route
	// EgressDrainTimeout bounds how long a replaced forwarder (a rotated
	// credential) finishes the requests in progress. Default
	// egress.DefaultDrainTimeout.
	EgressDrainTimeout time.Duration
	// Prewarm lists the RuntimeProfile pools to keep filled.
	Prewarm []PrewarmProfile
	// ReadyTimeout bounds how long a new box may take to report ready. Default 30s.
	ReadyTimeout time.Duration
	// ReleaseGrace is how long programs get after SIGTERM on Release. Default 5s.
	ReleaseGrace time.Duration
	// CgroupRoot is where cgroup hierarchies are mounted. Default /sys/fs/cgroup.
	CgroupRoot string
	// CgroupParent is the cgroup (per hierarchy) under which boxes are placed.
	// Default "astrabox-" and a hash of StateDir, so that backends with different
	// state dirs on one host never take each other's boxes for leftovers.
	CgroupParent string
	// DisableNestedUserNamespaces forbids user namespaces inside boxes. It is
	// off by default because Codex's own sandbox needs them.
	DisableNestedUserNamespaces bool
	// Logger receives operational logs. Default: no logs.
	Logger *zap.Logger
}

// PrewarmProfile is one prewarm pool: Size ready boxes made from Spec.
type PrewarmProfile struct {
	Key  string
	Spec sandbox.Spec
	Size int
}

func (o Options) withDefaults() Options {
	if o.UIDFirst == 0 {
		o.UIDFirst = 200000
	}
	if o.UIDCount == 0 {
		o.UIDCount = 10000
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.ReleaseGrace <= 0 {
		o.ReleaseGrace = 5 * time.Second
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	if o.CgroupParent == "" {
		sum := sha256.Sum256([]byte(filepath.Clean(o.StateDir)))
		o.CgroupParent = "astrabox-" + hex.EncodeToString(sum[:4])
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// preflight checks what the backend needs on this machine and returns an error
// that names the fix.
func (o *Options) preflight() error {
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("local sandbox: state dir %q must be an absolute path (set the sandbox state dir)", o.StateDir)
	}
	// Box accounts open their bound folders themselves, so every parent of the
	// state dir must let others traverse it.
	for p := filepath.Dir(filepath.Clean(o.StateDir)); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("local sandbox: %s (a parent of the state dir) is not traversable by box accounts: "+
				"run `chmod o+x %s` or choose another state dir", p, p)
		}
		if p == "/" {
			break
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("local sandbox: the worker must run as root to give each box its own uid " +
			"(run the worker as root, or choose another sandbox backend)")
	}
	if o.BwrapPath == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return errors.New("local sandbox: bubblewrap (bwrap) not found: install it with " +
				"`apt-get install bubblewrap` (or `make deps`)")
		}
		o.BwrapPath = p
	}
	if _, err := os.Stat(o.BwrapPath); err != nil {
		return fmt.Errorf("local sandbox: bubblewrap at %s: %w (install it with `apt-get install bubblewrap`)", o.BwrapPath, err)
	}
	if raw, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(raw)) == "0" {
		return errors.New("local sandbox: user namespaces are disabled: set `sysctl user.max_user_namespaces=10000`")
	}
	if o.RunnerPath == "" {
		o.RunnerPath = findRunner()
	}
	if o.RunnerPath == "" {
		return errors.New("local sandbox: astrabox-runner binary not found: build it with `make build` " +
			"(CGO_ENABLED=0 go build -o bin/ ./cmd/astrabox-runner) or set the runner path")
	}
	if st, err := os.Stat(o.RunnerPath); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("local sandbox: runner %s is not an executable file: build it with `make build`", o.RunnerPath)
	}
	if o.UIDFirst < 1000 || o.UIDCount < 1 || o.UIDFirst+o.UIDCount > 1<<31-2 {
		return fmt.Errorf("local sandbox: uid range %d+%d is unusable: choose a first uid of at least 1000 "+
			"and a positive count below 2^31", o.UIDFirst, o.UIDCount)
	}
	if name, uid, ok := accountInRange("/etc/passwd", o.UIDFirst, o.UIDCount); ok {
		return fmt.Errorf("local sandbox: uid range %d-%d holds the existing account %s (uid %d): "+
			"choose a range no account uses", o.UIDFirst, o.UIDFirst+o.UIDCount-1, name, uid)
	}
	if name, gid, ok := accountInRange("/etc/group", o.UIDFirst, o.UIDCount); ok {
		return fmt.Errorf("local sandbox: gid range %d-%d holds the existing group %s (gid %d): "+
			"choose a range no group uses", o.UIDFirst, o.UIDFirst+o.UIDCount-1, name, gid)
	}
	return nil
}

// findRunner looks for astrabox-runner beside the executable, then on PATH.
func findRunner() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "astrabox-runner")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("astrabox-runner"); err == nil {
		return p
	}
	return ""
}

// accountInRange reports the first passwd/group entry whose id is in range.
func accountInRange(path string, first, count int) (string, int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		id, err := strconv.Atoi(fields[2])
		if err == nil && id >= first && id < first+count {
			return fields[0], id, true
		}
	}
	return "", 0, false
}
