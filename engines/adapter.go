package engines

import (
	"context"
	"reflect"
)

// EngineAdapter connects one Agent program's supported protocol to AstraBox. It declares
// what the program needs in a sandbox and starts or reconnects the program in a box the
// platform has prepared. It does not choose, create or replace sandboxes: AstraBox alone
// decides whether to claim, create, reconnect or replace one.
//
// Register an adapter with Registry.Register. Optional behaviour is expressed through the
// optional interfaces SeamsAPIVersioned and SharedConversationServiceLauncher.
type EngineAdapter interface {
	// Capabilities returns the engine's declaration. It must be the same value on every
	// call: the registry validates it once.
	Capabilities() EngineRuntimeCapabilities

	// EngineClientType returns the concrete type of the RuntimeClient ActivateRuntime
	// returns, e.g. reflect.TypeFor[*Client](). Registration checks that it serves the
	// whole runtime contract, including the optional interfaces the capabilities declare.
	EngineClientType() reflect.Type

	// SandboxRequest returns what the program needs from the sandbox: entry point,
	// model-credential destination, working-directory variable, environment, ports.
	SandboxRequest() EngineSandboxRequest

	// StartupMaterialRequest returns the platform material the adapter consumes:
	// transcript storage, native runtime-state storage, sandbox-death notifications and
	// named platform secrets. AstraBox resolves them into the EngineStartupContext.
	StartupMaterialRequest() EngineStartupMaterialRequest

	// ActivateRuntime starts or connects the Agent program in the prepared box and
	// returns the live runtime. On a new Session it starts the conversation; when
	// sc.AttachMode is set it restores exactly the Session's native conversation from
	// sc.ResumeSessionKey and sc.ResumeMaterial and must never bind the Session to a new
	// or empty vendor conversation. Before returning it passes the client to
	// InitializeRuntimeClient and returns the manifest that call produced.
	ActivateRuntime(ctx context.Context, sc EngineStartupContext, box Box) (SessionRuntime, error)
}

// SeamsAPIVersioned is implemented by an adapter that pins the extension-interface
// version it was built against. Registration fails unless it equals SeamsAPIVersion.
type SeamsAPIVersioned interface {
	SeamsAPIVersion() int
}

// SharedConversationServiceLauncher is implemented by an adapter whose engine needs a
// service in a conversation's isolated session under shared sandbox tenancy. The platform
// starts the returned image-installed service in the background, as the conversation's
// runtime identity, and waits for its port before calling ActivateRuntime.
type SharedConversationServiceLauncher interface {
	SharedConversationServiceLaunch(sc EngineStartupContext) (ConversationServiceLaunch, error)
}

// ConversationServiceLaunch describes the background service a
// SharedConversationServiceLauncher needs.
type ConversationServiceLaunch struct {
	// Command is the image-installed service's argv.
	Command []string `json:"command"`
	// Env holds extra environment values for the service.
	Env map[string]string `json:"env,omitempty"`
	// Port is the in-box port the platform waits for before activation.
	Port int `json:"port"`
}

// SessionRuntime is what ActivateRuntime returns: the live connection and what the
// platform saves about it.
type SessionRuntime struct {
	// EngineClient is the live runtime client for the Session.
	EngineClient RuntimeClient
	// EngineManifest is the manifest InitializeRuntimeClient returned for EngineClient.
	EngineManifest EngineCapabilityManifest
	// ResumeMaterial is adapter-owned resume state the platform stores with the Session
	// and hands back in EngineStartupContext.ResumeMaterial on attach; nil when the
	// engine session key alone is enough. AstraBox never interprets it.
	ResumeMaterial []byte
}
