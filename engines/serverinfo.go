package engines

import (
	"errors"
	"fmt"
)

// ServerInfo is what a ServerInfoProvider observes about the runtime it is connected
// to. Startup, recovery and reader connection save it with its sandbox id and read
// time; the admin Session views read that snapshot and never wake compute for it.
type ServerInfo struct {
	// RuntimeVersions is the in-box runtime's observed versions, or nil when unknown.
	RuntimeVersions *RuntimeVersions `json:"runtime_versions"`
}

// RuntimeVersions is one observation of the in-box runtime.
type RuntimeVersions struct {
	// RuntimeGeneration is the observed incarnation id of the runtime, which tells one
	// instance from another.
	RuntimeGeneration string `json:"runtime_generation"`
	// Components are the observed components. Names and version strings belong to the
	// adapter.
	Components []RuntimeComponent `json:"components"`
}

// RuntimeComponent is one observed component version. Deployment labels and host
// package versions are not observations of an in-box runtime and do not belong here.
type RuntimeComponent struct {
	// Component names the component, e.g. "claude_code".
	Component string `json:"component"`
	// Version is a nonempty string when known and nil (JSON null) when unknown.
	Version *string `json:"version"`
	// Source names where the observation came from, e.g. "cli --version".
	Source string `json:"source"`
	// Reason explains an unknown version; required when Version is nil.
	Reason string `json:"reason,omitempty"`
}

// KnownComponent builds a component record with a known version.
func KnownComponent(component, version, source string) RuntimeComponent {
	return RuntimeComponent{Component: component, Version: &version, Source: source}
}

// UnknownComponent builds a component record whose version is unknown, with why.
func UnknownComponent(component, source, reason string) RuntimeComponent {
	return RuntimeComponent{Component: component, Source: source, Reason: reason}
}

// Validate checks the rules of a runtime_versions observation: a runtime generation;
// every component named, with its observation source; a known version is a nonempty
// string, an unknown one is null with a nonempty reason.
func (v RuntimeVersions) Validate() error {
	var errs []error
	if v.RuntimeGeneration == "" {
		errs = append(errs, errors.New("runtime_versions has no runtime_generation"))
	}
	seen := map[string]bool{}
	for i, c := range v.Components {
		where := fmt.Sprintf("component %d (%q)", i, c.Component)
		if c.Component == "" {
			errs = append(errs, fmt.Errorf("%s has no name", where))
		} else if seen[c.Component] {
			errs = append(errs, fmt.Errorf("%s is listed twice", where))
		}
		seen[c.Component] = true
		if c.Source == "" {
			errs = append(errs, fmt.Errorf("%s names no observation source", where))
		}
		switch {
		case c.Version != nil && *c.Version == "":
			errs = append(errs, fmt.Errorf("%s has an empty version string; use null with a reason", where))
		case c.Version == nil && c.Reason == "":
			errs = append(errs, fmt.Errorf("%s has an unknown version without a reason", where))
		}
	}
	return errors.Join(errs...)
}

// Validate checks the runtime versions when present.
func (s ServerInfo) Validate() error {
	if s.RuntimeVersions == nil {
		return nil
	}
	return s.RuntimeVersions.Validate()
}
