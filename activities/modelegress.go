package activities

import (
	"fmt"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// The model service reaches a box through the platform's egress: the box's
// control service listens on ModelForwardPort of the box's own loopback and
// forwards to the host-side handler named ModelForwardName, which adds the real
// credential. The Agent program only ever holds ModelPlaceholderKey.
const (
	ModelForwardName    = "model"
	ModelForwardPort    = 47080
	ModelPlaceholderKey = "astrabox-placeholder-key"
)

// AddModelEgress points the program at the model service through the box's
// egress forward, at the destination the adapter declared (its base URL and
// API key variables). An adapter that declares no destination gets nothing.
func AddModelEgress(spec *sandbox.Spec, req engines.EngineSandboxRequest) {
	dest := req.ModelCredential
	if dest.BaseURLEnv == "" && dest.APIKeyEnv == "" {
		return
	}
	for _, f := range spec.Network.Forwards {
		if f.Name == ModelForwardName {
			return
		}
	}
	spec.Network.Forwards = append(spec.Network.Forwards, sandbox.Forward{Name: ModelForwardName, Port: ModelForwardPort})
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	if dest.BaseURLEnv != "" {
		spec.Env[dest.BaseURLEnv] = fmt.Sprintf("http://127.0.0.1:%d", ModelForwardPort)
	}
	if dest.APIKeyEnv != "" {
		spec.Env[dest.APIKeyEnv] = ModelPlaceholderKey
	}
}
