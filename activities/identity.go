package activities

import (
	"fmt"
	"path"
	"strings"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// composeIdentity is the runtime identity of a conversation, composed from one set of
// rules for every engine per (sandbox tenancy, Session kind):
//
//   - conversation tenancy, either kind: the box is the conversation's, so the program
//     runs as the box's own account with the box's home and workspace, as every
//     backend lays a box out by default (sandbox.Spec.WithDefaults, which DefaultSpec
//     leaves as it is, so prewarmed boxes fit any Session of the profile);
//   - shared tenancy: each conversation has its own account, named from its Session
//     kind and id ("ag-" for agent_chat, "as-" for assistant_chat, then 12 hex digits
//     of the id), home /home/<account> and temporary directory /tmp/<account>; an
//     agent_chat works in its own tree <workspace>/conversations/<session id>, while
//     an assistant_chat works in the Assistant's workspace <workspace>/assistant,
//     which the person's conversations share as their runtime state does.
//
// Shared tenancy is refused earlier (checkTenancy) on a backend that cannot isolate
// conversations in one box, which today is every backend.
func composeIdentity(tenancy engines.SandboxTenancy, kind engines.SessionKind, sessionID string) (*engines.RuntimeIdentity, error) {
	box := sandbox.Spec{}.WithDefaults()
	ws := box.Workspace.MountPath
	switch tenancy {
	case "", engines.TenancyConversation:
		home := box.Identity.Home
		return &engines.RuntimeIdentity{
			Account: box.Identity.Account, HomeDir: home, WorkspaceDir: ws, SourceDir: ws, FileRoot: ws,
			CacheDir: path.Join(home, ".cache"), TempDir: "/tmp",
		}, nil
	case engines.TenancyShared:
		prefix, work := "", ""
		switch kind {
		case engines.SessionKindAgentChat:
			prefix, work = "ag-", path.Join(ws, "conversations", sessionID)
		case engines.SessionKindAssistantChat:
			prefix, work = "as-", path.Join(ws, "assistant")
		default:
			return nil, fmt.Errorf("compose runtime identity: unknown Session kind %q", kind)
		}
		hex := strings.ReplaceAll(sessionID, "-", "")
		if len(hex) < 12 {
			return nil, fmt.Errorf("compose runtime identity: Session id %q is too short to name an account", sessionID)
		}
		account := prefix + hex[:12]
		home := path.Join("/home", account)
		return &engines.RuntimeIdentity{
			Account: account, HomeDir: home, WorkspaceDir: work, SourceDir: work, FileRoot: work,
			CacheDir: path.Join(home, ".cache"), TempDir: path.Join("/tmp", account),
		}, nil
	default:
		return nil, fmt.Errorf("compose runtime identity: unknown sandbox tenancy %q", tenancy)
	}
}

// checkTenancy refuses a RuntimeProfile's tenancy the backend or engine cannot serve.
// The API refuses such a profile when it is saved; this catches one saved before the
// backend or engine changed. Conversation tenancy of an engine that requires process
// sessions needs a backend with them; shared tenancy needs a backend that isolates
// conversations in one box and an engine placed per conversation account.
func checkTenancy(tenancy engines.SandboxTenancy, backendName string, backend sandbox.Capabilities, caps engines.EngineRuntimeCapabilities) error {
	if tenancy != engines.TenancyShared {
		if caps.RequiresProcessSessions && !backend.ProcessSessions {
			return fmt.Errorf("the Agent program %s runs as a process session in its box, which the sandbox backend %q does not support", caps.EngineKind, backendName)
		}
		return nil
	}
	if !backend.IsolatedSessions {
		return fmt.Errorf("the runtime profile asks for shared sandbox tenancy, but the sandbox backend %q cannot isolate conversations in one box", backendName)
	}
	if caps.ConversationPlacement != engines.PlacementPerConversationAccount {
		return fmt.Errorf("the runtime profile asks for shared sandbox tenancy, but the Agent program %s runs as the box account (%s)", caps.EngineKind, caps.ConversationPlacement)
	}
	return nil
}
