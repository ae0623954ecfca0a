// Package buildinfo names the build of the running binary, for the runtime-info
// snapshots the platform keeps per runtime (the runner's build, the adapters' build).
package buildinfo

import "runtime/debug"

// revisionLen is how many hex digits of the VCS revision name a build.
const revisionLen = 12

// Build names the running binary's build: its VCS revision (short, "-dirty" when
// built from modified sources), else its module version, else "unknown".
func Build() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > revisionLen {
			rev = rev[:revisionLen]
		}
		return rev + dirty
	}
	if v := info.Main.Version; v != "" {
		return v
	}
	return "unknown"
}
