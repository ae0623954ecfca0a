package activities_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

func TestAddModelEgress(t *testing.T) {
	req := engines.EngineSandboxRequest{ModelCredential: engines.ModelCredentialDestination{APIKeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL"}}
	var spec sandbox.Spec
	activities.AddModelEgress(&spec, req)
	activities.AddModelEgress(&spec, req)
	assert.Equal(t, []sandbox.Forward{{Name: "model", Port: activities.ModelForwardPort}}, spec.Network.Forwards, "added once")
	assert.Equal(t, "http://127.0.0.1:47080", spec.Env["ANTHROPIC_BASE_URL"])
	assert.Equal(t, activities.ModelPlaceholderKey, spec.Env["ANTHROPIC_API_KEY"], "the box holds a placeholder, never the key")

	var none sandbox.Spec
	activities.AddModelEgress(&none, engines.EngineSandboxRequest{})
	assert.Empty(t, none.Network.Forwards)
	assert.Empty(t, none.Env)
}
