package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/buildinfo"
	"github.com/astrabox/astrabox/sandbox"
)

// RuntimeInfo is the snapshot of a runtime saved at each activation (new box,
// reconnect, restore) in sessions.runtime_info, for the administrator's Session view:
// what ran, observed then, without waking compute when it is read.
type RuntimeInfo struct {
	// SandboxID is the box the observation was made in.
	SandboxID string `json:"sandbox_id"`
	// ObservedAt is when the snapshot was taken.
	ObservedAt time.Time `json:"observed_at"`
	// RuntimeVersions is what the program reported (ServerInfoProvider), or nil when
	// its engine does not declare SupportsServerInfo.
	RuntimeVersions *engines.RuntimeVersions `json:"runtime_versions"`
	// RunnerBuild is the build of the box's runner, empty when the backend cannot say.
	RunnerBuild string `json:"runner_build,omitempty"`
	// AdapterVersion is the adapter's build: the platform binary that carries it, and
	// the engine-contract version it implements.
	AdapterVersion string `json:"adapter_version"`
}

// reportedModel is the model the program reported for its runtime, or "" when it has
// not said or its client cannot say (engines.ModelReporter).
func reportedModel(client engines.RuntimeClient) string {
	if m, ok := client.(engines.ModelReporter); ok {
		return m.ModelName()
	}
	return ""
}

// runnerBuildReporter is a box handle that can name its runner's build (the local
// backend's).
type runnerBuildReporter interface {
	RunnerBuild(ctx context.Context) (string, error)
}

// adapterVersion names the adapters' build: they are compiled into this binary.
func adapterVersion() string {
	return fmt.Sprintf("astrabox %s (engine contract v%d)", buildinfo.Build(), engines.SeamsAPIVersion)
}

// observeRuntime takes the runtime-info snapshot of a client just activated. An
// engine that declares SupportsServerInfo must answer; the runner's build is best
// effort (an older runner does not say).
func observeRuntime(ctx context.Context, client engines.RuntimeClient, caps engines.EngineRuntimeCapabilities, h sandbox.Handle) (RuntimeInfo, error) {
	info := RuntimeInfo{SandboxID: h.ID(), ObservedAt: time.Now().UTC(), AdapterVersion: adapterVersion()}
	if caps.SupportsServerInfo {
		p, ok := client.(engines.ServerInfoProvider)
		if !ok {
			return info, fmt.Errorf("engine %s declares server info, but its client does not provide it", caps.EngineKind)
		}
		si, err := p.ServerInfo(ctx)
		if err != nil {
			return info, fmt.Errorf("get server info: %w", err)
		}
		if err := si.Validate(); err != nil {
			return info, fmt.Errorf("server info: %w", err)
		}
		info.RuntimeVersions = si.RuntimeVersions
	}
	if r, ok := h.(runnerBuildReporter); ok {
		if build, err := r.RunnerBuild(ctx); err == nil {
			info.RunnerBuild = build
		}
	}
	return info, nil
}

// memo is the one-line form of the snapshot for the workflow's memo, where operators
// see it in the Temporal UI: component versions, runner and adapter builds.
func (i RuntimeInfo) memo() string {
	var parts []string
	if i.RuntimeVersions != nil {
		for _, c := range i.RuntimeVersions.Components {
			v := "unknown"
			if c.Version != nil {
				v = *c.Version
			}
			parts = append(parts, c.Component+" "+v)
		}
	}
	if i.RunnerBuild != "" {
		parts = append(parts, "runner "+i.RunnerBuild)
	}
	parts = append(parts, "adapter "+i.AdapterVersion)
	return strings.Join(parts, "; ")
}

func (i RuntimeInfo) encode() (json.RawMessage, error) {
	raw, err := json.Marshal(i)
	if err != nil {
		return nil, fmt.Errorf("encode runtime info: %w", err)
	}
	return raw, nil
}
