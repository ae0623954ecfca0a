package engines

import (
	"errors"
	"fmt"
)

// EngineSandboxRequest is what an Agent program needs from its sandbox. The platform
// applies it together with the selected backend, workspace, runtime identity, network
// policy and credentials; the adapter never provisions sandboxes itself.
type EngineSandboxRequest struct {
	// EntryPoint, when set, is the image's own entry point (argv): the resident service
	// the program's runtime client reaches, such as a control or API server. The
	// platform starts it in every box of the engine before the box reports ready
	// (prewarmed boxes too), under the box's control service, which every backend
	// supplies itself; a ReadinessPort makes the box wait until it listens. Leave it
	// empty when ActivateRuntime starts the program per conversation (Box.StartProcess),
	// as a process-session engine does.
	EntryPoint []string `json:"entry_point,omitempty"`
	// ModelCredential says where the program expects its model credential.
	ModelCredential ModelCredentialDestination `json:"model_credential"`
	// WorkingDirectoryVariable is the environment variable through which the program
	// learns its working directory; the platform sets it to the resolved workspace.
	WorkingDirectoryVariable string `json:"working_directory_variable"`
	// Environment holds fixed environment values for the program.
	Environment map[string]string `json:"environment,omitempty"`
	// PublishedPorts are the in-box ports the adapter and its runtime client reach
	// through Box.DialPort (relayed by the box's control service); a port not published
	// here is refused.
	PublishedPorts []PublishedPort `json:"published_ports,omitempty"`
	// ReadinessPort, when nonzero, is a published port the entry point listens on once
	// it can serve: the box reports ready only then, and an entry point that exits
	// first or does not listen in time fails startup with its exit status and output.
	ReadinessPort int `json:"readiness_port,omitempty"`
}

// ModelCredentialDestination says where the program expects its model credential.
// The credential itself stays on the host side: the platform puts a placeholder key in
// APIKeyEnv and the forwarder's address in BaseURLEnv in every process of the box, and
// the forwarder adds the real credential to the requests it passes on. A credential
// file is not offered: the box never holds a real key to write into one, and a program
// that reads a placeholder from a file has its adapter write it.
type ModelCredentialDestination struct {
	// APIKeyEnv is the environment variable holding the (placeholder) key, e.g.
	// ANTHROPIC_API_KEY.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// BaseURLEnv is the environment variable holding the model service base URL, e.g.
	// ANTHROPIC_BASE_URL; empty when the adapter points the program at the forwarder
	// through the program's own configuration.
	BaseURLEnv string `json:"base_url_env,omitempty"`
}

// PublishedPort is an in-box port the platform publishes.
type PublishedPort struct {
	// Name is a short label, e.g. "control".
	Name string `json:"name"`
	// Port is the in-box TCP port.
	Port int `json:"port"`
}

// Publishes reports whether port is one of the published ports.
func (r EngineSandboxRequest) Publishes(port int) bool {
	for _, p := range r.PublishedPorts {
		if p.Port == port {
			return true
		}
	}
	return false
}

// Validate checks the request's structure.
func (r EngineSandboxRequest) Validate() error {
	var errs []error
	if len(r.EntryPoint) > 0 && r.EntryPoint[0] == "" {
		errs = append(errs, errors.New("sandbox request's entry point names no program"))
	}
	if r.ModelCredential.APIKeyEnv == "" && r.ModelCredential.BaseURLEnv == "" {
		errs = append(errs, errors.New("sandbox request has no model-credential destination"))
	}
	if r.WorkingDirectoryVariable == "" {
		errs = append(errs, errors.New("sandbox request has no working-directory variable"))
	}
	seen := map[int]bool{}
	for _, p := range r.PublishedPorts {
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, fmt.Errorf("published port %q has invalid number %d", p.Name, p.Port))
		}
		if seen[p.Port] {
			errs = append(errs, fmt.Errorf("port %d published twice", p.Port))
		}
		seen[p.Port] = true
	}
	if r.ReadinessPort != 0 && !seen[r.ReadinessPort] {
		errs = append(errs, fmt.Errorf("readiness port %d is not a published port", r.ReadinessPort))
	}
	if r.ReadinessPort != 0 && len(r.EntryPoint) == 0 {
		errs = append(errs, fmt.Errorf("readiness port %d declared without an entry point to listen on it", r.ReadinessPort))
	}
	return errors.Join(errs...)
}
