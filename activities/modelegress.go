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

// Programs that speak the OpenAI API (Codex) reach it through their own forward, so
// the host side adds the credential that API takes.
const (
	OpenAIModelForwardName = "model-openai"
	OpenAIModelForwardPort = 47081
)

// Programs that speak the Gemini API (Gemini CLI) reach it through theirs, whose
// host side sends the credential as x-goog-api-key.
const (
	GeminiModelForwardName = "model-gemini"
	GeminiModelForwardPort = 47082
)

// AddModelEgress points the program at the model service through the box's
// egress forward, at the destination the adapter declared (its base URL and
// API key variables). An adapter that declares no destination gets nothing.
func AddModelEgress(spec *sandbox.Spec, req engines.EngineSandboxRequest) {
	AddModelEgressVia(spec, req, sandbox.Forward{Name: ModelForwardName, Port: ModelForwardPort})
}

// AddModelEgressVia is AddModelEgress through the given forward.
func AddModelEgressVia(spec *sandbox.Spec, req engines.EngineSandboxRequest, forward sandbox.Forward) {
	dest := req.ModelCredential
	if dest.BaseURLEnv == "" && dest.APIKeyEnv == "" {
		return
	}
	for _, f := range spec.Network.Forwards {
		if f.Name == forward.Name {
			return
		}
	}
	spec.Network.Forwards = append(spec.Network.Forwards, forward)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	if dest.BaseURLEnv != "" {
		spec.Env[dest.BaseURLEnv] = fmt.Sprintf("http://127.0.0.1:%d", forward.Port)
	}
	if dest.APIKeyEnv != "" {
		spec.Env[dest.APIKeyEnv] = ModelPlaceholderKey
	}
}
