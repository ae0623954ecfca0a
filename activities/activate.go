package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// ActivateRuntime connects the Agent program in a prepared box through its adapter,
// checks the client with engines.InitializeRuntimeClient, applies the Session's
// permission mode (settling a refusal, see settleRefusedMode), records the placement,
// and keeps the live client in this process for Relay and the other host activities.
// It runs on the host task queue PrepareRuntime named.
func (a *Activities) ActivateRuntime(ctx context.Context, req ActivateRequest) (ActivateResult, error) {
	defer a.keepAlive(ctx)()
	sess, agent, profile, adapter, err := a.resolve(ctx, req.SessionID)
	if err != nil {
		return ActivateResult{}, err
	}
	if sess.RuntimeGeneration != req.RuntimeGeneration {
		return ActivateResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("runtime generation %d superseded by %d", req.RuntimeGeneration, sess.RuntimeGeneration), ErrTypeRuntimeLost, nil)
	}
	backend, err := a.backendFor(profile)
	if err != nil {
		return ActivateResult{}, err
	}
	h, err := backend.Get(ctx, req.SandboxID)
	if err != nil {
		if err := a.checkAlive(ctx, backend, req.SandboxID); err != nil {
			return ActivateResult{}, err
		}
		return ActivateResult{}, fmt.Errorf("get box %s: %w", req.SandboxID, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = h.Close()
		}
	}()
	box, err := a.deps.OpenBox(ctx, h)
	if err != nil {
		return ActivateResult{}, fmt.Errorf("open box %s: %w", req.SandboxID, err)
	}
	box = newPlatformBox(box, adapter)
	sc := engines.EngineStartupContext{
		SessionID:   sess.ID,
		SessionKind: engines.SessionKind(sess.Kind),
		SandboxID:   req.SandboxID,
		AttachMode:  engines.AttachMode(req.AttachMode),
	}
	if sc.AttachMode != "" {
		if sess.EngineSessionKey == nil || *sess.EngineSessionKey == "" {
			return ActivateResult{}, temporal.NewNonRetryableApplicationError("attach without a stored conversation key", ErrTypeConfiguration, nil)
		}
		sc.ResumeSessionKey = *sess.EngineSessionKey
		if len(sess.ResumeMaterial) > 0 {
			sc.ResumeMaterial = json.RawMessage(sess.ResumeMaterial)
		}
		// Whether the conversation ever held content is the platform's knowledge, not
		// the box's: a program that writes its native log only at its first turn leaves
		// nothing to resume for a Session that never got a message.
		hasContent, err := a.deps.Store.HasConversationContent(ctx, sess.ID)
		if err != nil {
			return ActivateResult{}, err
		}
		sc.ConversationEmpty = !hasContent
	}
	if sess.PermissionMode != nil {
		sc.PermissionMode = *sess.PermissionMode
	}
	if sc.RuntimeIdentity, err = composeIdentity(engines.SandboxTenancy(profile.SandboxTenancy), sc.SessionKind, sess.ID); err != nil {
		return ActivateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConfiguration, err)
	}
	caps := adapter.Capabilities()
	if err := a.checkRequiredCommands(ctx, h, sess.ID, caps); err != nil {
		return ActivateResult{}, err
	}
	if sc.Secrets, err = a.resolveSecrets(ctx, sess.ID, adapter); err != nil {
		return ActivateResult{}, err
	}
	if sc.AgentConfig, err = a.resolveAgentConfig(ctx, sess.ID, agent.ID); err != nil {
		return ActivateResult{}, err
	}
	if sc.AttachMode == engines.AttachRestore {
		// The replacement box gets the conversation's native log before the program
		// resumes the conversation from it.
		if err := a.restoreSessionLog(ctx, box, caps, sc.RuntimeIdentity, sess.ID, sc.ResumeSessionKey); err != nil {
			return ActivateResult{}, err
		}
	}
	sc.CallbackCredentials = a.callbackCredentials(sess, adapter)
	if sc.TracingEndpoint, err = a.boxTracingEndpoint(ctx, h, profile, caps); err != nil {
		return ActivateResult{}, err
	}
	rt, err := adapter.ActivateRuntime(ctx, sc, box)
	if required := (*engines.RuntimeStateSaveRequired)(nil); errors.As(err, &required) {
		return ActivateResult{}, a.saveRequired(ctx, sess.ID, required)
	}
	if err != nil {
		return ActivateResult{}, fmt.Errorf("activate runtime of engine %s: %w", adapter.Capabilities().EngineKind, err)
	}
	client := rt.EngineClient
	// The adapter ran InitializeRuntimeClient; the platform checks the client it is
	// about to keep against the registered declaration and the conversation it asked for.
	if _, err := engines.InitializeRuntimeClient(ctx, client, caps, sc.ResumeSessionKey); err != nil {
		_ = client.Close()
		return ActivateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConfiguration, err)
	}
	// A stored mode the program refuses is settled, never a failed activation: the
	// Session would otherwise be terminated for a setting.
	if err := a.applyStoredMode(ctx, client, caps, sess); err != nil {
		_ = client.Close()
		return ActivateResult{}, err
	}
	observed, err := observeRuntime(ctx, client, caps, h)
	if err != nil {
		_ = client.Close()
		return ActivateResult{}, err
	}
	infoJSON, err := observed.encode()
	if err != nil {
		_ = client.Close()
		return ActivateResult{}, err
	}
	err = a.deps.Store.RecordRuntimeActive(ctx, store.RuntimeActivation{
		SessionID:         sess.ID,
		RuntimeGeneration: req.RuntimeGeneration,
		HostTaskQueue:     a.deps.HostTaskQueue,
		EngineSessionKey:  client.EngineSessionKey(),
		ResumeMaterial:    rt.ResumeMaterial,
		RuntimeInfo:       infoJSON,
		ModelName:         reportedModel(client),
	})
	if err != nil {
		_ = client.Close()
		if errors.Is(err, store.ErrLeaseLost) {
			return ActivateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeRuntimeLost, err)
		}
		return ActivateResult{}, err
	}
	keep = true
	a.live.put(&liveRuntime{sessionID: sess.ID, generation: req.RuntimeGeneration, client: client, handle: h,
		box: box, caps: caps, identity: sc.RuntimeIdentity})
	return ActivateResult{HostTaskQueue: a.deps.HostTaskQueue, RuntimeSummary: observed.memo()}, nil
}
