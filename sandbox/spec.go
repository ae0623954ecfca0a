package sandbox

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// Spec describes a box to create. It maps onto OpenSandbox's CreateSandboxRequest:
// Image -> image, Env -> env, Limits -> resourceLimits, Network -> networkPolicy,
// Timeout -> timeout, Workspace.Volume -> volumes[].pvc, Metadata -> metadata.
type Spec struct {
	// ProfileKey names the RuntimeProfile the box is for; prewarm pools are kept
	// per key.
	ProfileKey string `json:"profile_key,omitempty"`
	// Image is the read-only root the box sees.
	Image Image `json:"image"`
	// Identity is the account the box's processes run as.
	Identity Identity `json:"identity"`
	// Workspace is the box's writable working tree.
	Workspace Workspace `json:"workspace"`
	// Env is given to every process of the box (process env overrides it).
	Env map[string]string `json:"env,omitempty"`
	// Mounts are extra read-only host directories (program installs, policy files).
	Mounts []Mount `json:"mounts,omitempty"`
	// Limits bound the box's resources.
	Limits Limits `json:"limits"`
	// Network says what the box may reach.
	Network NetworkPolicy `json:"network"`
	// Services are resident processes started before the box reports ready
	// (prewarmed boxes have them running before any Session claims them).
	Services []Service `json:"services,omitempty"`
	// Timeout, when positive, bounds the box's life; the backend destroys it after.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Metadata is kept with the box and returned by Info.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Image selects the box's root filesystem.
type Image struct {
	// Root is a directory holding an unpacked root filesystem. Empty means the
	// host's own system directories (/usr and a minimal /etc), read-only.
	Root string `json:"root,omitempty"`
	// URI names an OCI image for backends that pull images (OpenSandbox).
	URI string `json:"uri,omitempty"`
}

// Identity is the runtime identity inside the box.
type Identity struct {
	// Account is the user name shown inside the box (default "agent").
	Account string `json:"account,omitempty"`
	// Home is the account's home directory inside the box (default
	// <workspace>/.home).
	Home string `json:"home,omitempty"`
}

// WorkspaceKind says whether the workspace outlives the box.
type WorkspaceKind string

// Workspace kinds.
const (
	WorkspaceEphemeral  WorkspaceKind = "ephemeral"
	WorkspacePersistent WorkspaceKind = "persistent"
)

// Workspace is the writable tree bound into the box.
type Workspace struct {
	Kind WorkspaceKind `json:"kind,omitempty"`
	// Volume names the persistent volume (Kind persistent).
	Volume string `json:"volume,omitempty"`
	// MountPath is where the box sees it (default /workspace).
	MountPath string `json:"mount_path,omitempty"`
}

// Mount is a read-only host directory or file shown inside the box.
type Mount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Limits bound a box's resources; zero means the backend's default.
type Limits struct {
	// CPUMillis is CPU time in thousandths of a core (500 = half a core).
	CPUMillis int64 `json:"cpu_millis,omitempty"`
	// MemoryBytes caps resident memory.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Pids caps the number of processes and threads.
	Pids int64 `json:"pids,omitempty"`
	// TmpBytes sizes the box's private /tmp.
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
	// WorkspaceBytes caps the workspace's size, where the backend can; one that
	// cannot refuses a spec that asks for it.
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"`
}

// NetworkMode is the box's network reach.
type NetworkMode string

// Network modes.
const (
	// NetworkNone: only the box's own loopback plus declared forwards (default).
	NetworkNone NetworkMode = "none"
	// NetworkHost: the host's network, for trusted development use only.
	NetworkHost NetworkMode = "host"
)

// NetworkPolicy says what the box may reach.
type NetworkPolicy struct {
	Mode NetworkMode `json:"mode,omitempty"`
	// Forwards are host services the box reaches on its own loopback: the box's
	// control service listens on 127.0.0.1:Port and forwards to the platform's
	// host-side socket named Name (credentials are added on the host side).
	Forwards []Forward `json:"forwards,omitempty"`
}

// Forward is one host service reachable from inside the box.
type Forward struct {
	Name string `json:"name"`
	Port int    `json:"port"`
	// Upstream, when set, is where the forward leads (an http or https URL: scheme,
	// host and an optional path prefix) instead of the service the host configures
	// under Name. Such a forward carries no credential: it serves a destination the
	// platform's own configuration chose for this box (a RuntimeProfile's tracing
	// endpoint), never one the box names.
	Upstream string `json:"upstream,omitempty"`
	// Paths are the only request paths the box may send through a forward with an
	// Upstream; any other is refused on the host side. Empty allows every path.
	Paths []string `json:"paths,omitempty"`
}

// Service is a resident process started when the box starts.
type Service struct {
	Process ProcessSpec `json:"process"`
	// ReadyPort, when set, is a box loopback port that must accept connections
	// before the box counts as ready.
	ReadyPort int `json:"ready_port,omitempty"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether s is usable as a process id, forward or volume name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// WithDefaults returns the spec with empty fields set to their defaults.
func (s Spec) WithDefaults() Spec {
	if s.Workspace.Kind == "" {
		s.Workspace.Kind = WorkspaceEphemeral
	}
	if s.Workspace.MountPath == "" {
		s.Workspace.MountPath = "/workspace"
	}
	if s.Identity.Account == "" {
		s.Identity.Account = "agent"
	}
	if s.Identity.Home == "" {
		s.Identity.Home = path.Join(s.Workspace.MountPath, ".home")
	}
	if s.Network.Mode == "" {
		s.Network.Mode = NetworkNone
	}
	return s
}

// Validate checks the parts of a spec every backend relies on. Backends add
// their own checks (for example that an image directory exists).
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, args...))
	}
	if !path.IsAbs(s.Workspace.MountPath) || path.Clean(s.Workspace.MountPath) == "/" {
		return bad("workspace mount path %q must be an absolute path below /", s.Workspace.MountPath)
	}
	switch s.Workspace.Kind {
	case WorkspaceEphemeral:
	case WorkspacePersistent:
		if !ValidName(s.Workspace.Volume) {
			return bad("persistent workspace needs a volume name, got %q", s.Workspace.Volume)
		}
	default:
		return bad("unknown workspace kind %q", s.Workspace.Kind)
	}
	if !regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`).MatchString(s.Identity.Account) {
		return bad("account %q is not a valid user name", s.Identity.Account)
	}
	if !path.IsAbs(s.Identity.Home) {
		return bad("home %q must be absolute", s.Identity.Home)
	}
	switch s.Network.Mode {
	case NetworkNone, NetworkHost:
	default:
		return bad("unknown network mode %q", s.Network.Mode)
	}
	ports := map[int]bool{}
	for _, f := range s.Network.Forwards {
		if !ValidName(f.Name) {
			return bad("forward name %q", f.Name)
		}
		if f.Port < 1 || f.Port > 65535 || ports[f.Port] {
			return bad("forward %q port %d is out of range or repeated", f.Name, f.Port)
		}
		ports[f.Port] = true
		if f.Upstream != "" {
			u, err := url.Parse(f.Upstream)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
				u.RawQuery != "" || u.Fragment != "" {
				return bad("forward %q upstream %q is not an http or https URL with a host", f.Name, f.Upstream)
			}
		}
		for _, p := range f.Paths {
			if !strings.HasPrefix(p, "/") {
				return bad("forward %q path %q must start with /", f.Name, p)
			}
		}
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) || path.Clean(m.Target) == "/" {
			return bad("mount %q -> %q needs absolute paths and a target below /", m.Source, m.Target)
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("environment name %q", k)
		}
	}
	for _, svc := range s.Services {
		if err := svc.Process.Validate(); err != nil {
			return err
		}
	}
	if s.Limits.CPUMillis < 0 || s.Limits.MemoryBytes < 0 || s.Limits.Pids < 0 || s.Limits.TmpBytes < 0 ||
		s.Limits.WorkspaceBytes < 0 {
		return bad("negative resource limit")
	}
	return nil
}
