package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/astrabox/astrabox/engines"
)

// RunAdapterContract checks an adapter the way registration and the platform will use
// it: every registration check (under the adapter's own engine_kind), a stable JSON
// declaration, a sandbox request that leaves credentials to the platform, a coherent
// shared-conversation service launch, and the runtime-client contract of its declared
// client type.
func RunAdapterContract(t testing.TB, adapter engines.EngineAdapter) {
	t.Helper()
	if adapter == nil {
		t.Errorf("adapter contract: adapter is nil")
		return
	}
	caps := adapter.Capabilities()
	reportValidation(t, "adapter contract", engines.ValidateAdapter(caps.EngineKind, adapter))

	raw, err := json.Marshal(caps)
	if err != nil {
		t.Errorf("adapter contract: capabilities do not encode: %v", err)
	} else {
		var back engines.EngineRuntimeCapabilities
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Errorf("adapter contract: capabilities do not decode: %v", err)
		} else if again, _ := json.Marshal(back); !bytes.Equal(raw, again) {
			t.Errorf("adapter contract: capabilities change across a JSON round trip:\n%s\n%s", raw, again)
		}
	}

	sandbox := adapter.SandboxRequest()
	for _, key := range []string{sandbox.ModelCredential.APIKeyEnv, sandbox.ModelCredential.BaseURLEnv} {
		if _, set := sandbox.Environment[key]; key != "" && set {
			t.Errorf("adapter contract: sandbox request environment sets %s, which the platform supplies as the model credential", key)
		}
	}
	if _, set := sandbox.Environment[sandbox.WorkingDirectoryVariable]; sandbox.WorkingDirectoryVariable != "" && set {
		t.Errorf("adapter contract: sandbox request environment sets %s, which the platform sets to the resolved workspace", sandbox.WorkingDirectoryVariable)
	}

	if launcher, ok := adapter.(engines.SharedConversationServiceLauncher); ok {
		checkServiceLaunch(t, caps, launcher)
	}

	RunRuntimeClientContract(t, adapter.EngineClientType(), WithCapabilities(caps))
}

func checkServiceLaunch(t testing.TB, caps engines.EngineRuntimeCapabilities, launcher engines.SharedConversationServiceLauncher) {
	t.Helper()
	if caps.ConversationPlacement != engines.PlacementPerConversationAccount {
		t.Errorf("adapter contract: a shared-conversation service needs per_conversation_account placement, declared %q", caps.ConversationPlacement)
	}
	kind := engines.SessionKindAgentChat
	if len(caps.SupportedSessionKinds) > 0 {
		kind = caps.SupportedSessionKinds[0]
	}
	sc := engines.EngineStartupContext{
		SessionID: "enginetest-session", SessionKind: kind, SandboxID: "enginetest-sandbox",
		RuntimeIdentity: &engines.RuntimeIdentity{Account: "enginetest", UID: 1000, GID: 1000, HomeDir: "/home/enginetest",
			WorkspaceDir: "/workspace", SourceDir: "/workspace/src", FileRoot: "/workspace/files", CacheDir: "/home/enginetest/.cache", TempDir: "/tmp/enginetest"},
	}
	launch, err := launcher.SharedConversationServiceLaunch(sc)
	if err != nil {
		t.Errorf("adapter contract: shared conversation service launch: %v", err)
		return
	}
	if len(launch.Command) == 0 || launch.Command[0] == "" {
		t.Errorf("adapter contract: shared conversation service launch has no command")
	}
	if launch.Port < 1 || launch.Port > 65535 {
		t.Errorf("adapter contract: shared conversation service launch declares port %d; the platform waits for it before activation", launch.Port)
	}
}

// reportValidation lists each problem of a *ValidationError as its own failure.
func reportValidation(t testing.TB, prefix string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ve *engines.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("%s: %v", prefix, err)
		return
	}
	for _, p := range ve.Problems {
		if p.Field == "engine_client_type" {
			continue // RunRuntimeClientContract reports these, method by method
		}
		if p.Field == "" {
			t.Errorf("%s: %s: %s", prefix, ve.Subject, p.Message)
		} else {
			t.Errorf("%s: %s: %s: %s", prefix, ve.Subject, p.Field, p.Message)
		}
	}
}
