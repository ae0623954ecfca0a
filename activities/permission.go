package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// A Session's stored permission mode is the mode its program runs in. A mode the
// owner asks for while a runtime is live is applied first and stored only once the
// program accepted it (ApplyPermissionMode, then StorePermissionMode); with no runtime
// live it is stored and the next runtime starts in it. A stored mode the program
// refuses when it connects, or when the workflow applies the stored mode again, never
// keeps the runtime down: the refusal is logged in the program's words and the stored
// mode is brought back to one the runtime holds (settleRefusedMode).

// ApplyPermissionMode sets a mode on the Session's live runtime and stores nothing. A
// refusal is a non-retryable ErrTypePermissionModeRefused whose message is the
// program's own; a lost connection is ErrTypeNoLiveRuntime.
func (a *Activities) ApplyPermissionMode(ctx context.Context, req PermissionModeRequest) error {
	l, err := a.live.get(req.SessionID, req.RuntimeGeneration)
	if err != nil {
		return err
	}
	err = setPermissionMode(ctx, l.client, req.PermissionMode)
	var refused *engines.RuntimeControlRefused
	switch {
	case errors.As(err, &refused):
		// A refusal is an answer, not a fault: benign keeps it out of error logs and alerts.
		return temporal.NewApplicationErrorWithOptions(refused.Message, ErrTypePermissionModeRefused,
			temporal.ApplicationErrorOptions{NonRetryable: true, Cause: err, Category: temporal.ApplicationErrorCategoryBenign})
	case errors.Is(err, engines.ErrRuntimeConnectionLost):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoLiveRuntime, err)
	}
	return err
}

// StorePermissionMode stores the Session's permission mode: one its live runtime
// accepted, or one the next runtime starts in. A deleted Session is ErrTypeSessionGone.
func (a *Activities) StorePermissionMode(ctx context.Context, req PermissionModeRequest) error {
	_, err := a.deps.Store.SetSessionPermissionMode(ctx, req.SessionID, req.PermissionMode)
	if errors.Is(err, store.ErrWrongLifecycle) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSessionGone, err)
	}
	return sessionErr(err)
}

// SetPermissionMode applies the Session's stored permission mode to the live runtime.
// A refusal is settled, not returned (see settleRefusedMode).
func (a *Activities) SetPermissionMode(ctx context.Context, ref RuntimeRef) error {
	l, err := a.live.get(ref.SessionID, ref.RuntimeGeneration)
	if err != nil {
		return err
	}
	sess, err := a.deps.Store.GetSessionByID(ctx, ref.SessionID)
	if err != nil {
		return sessionErr(err)
	}
	err = a.applyStoredMode(ctx, l.client, l.caps, sess)
	if errors.Is(err, engines.ErrRuntimeConnectionLost) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoLiveRuntime, err)
	}
	return err
}

// applyStoredMode sets the Session's stored mode on a client and settles a refusal.
// Other failures (a lost connection, a host problem) are returned, so the caller
// reconnects or retries.
func (a *Activities) applyStoredMode(ctx context.Context, client engines.RuntimeClient, caps engines.EngineRuntimeCapabilities, sess store.Session) error {
	if sess.PermissionMode == nil {
		return nil
	}
	err := setPermissionMode(ctx, client, *sess.PermissionMode)
	var refused *engines.RuntimeControlRefused
	if !errors.As(err, &refused) {
		return err
	}
	return a.settleRefusedMode(ctx, client, caps, sess, refused)
}

// settleRefusedMode keeps a runtime that refused the stored mode and makes the stored
// mode true again. The refused mode left the program in a mode the platform cannot
// read back, so it is switched to the engine's default for the Session's kind (the
// mode a new Session of that kind starts in) and that mode is stored; when there is
// none, or the program refuses it too, the stored mode becomes none (not known). The
// store write is a compare-and-set on the refused mode: a mode the owner chose since
// is kept, and the workflow applies it.
func (a *Activities) settleRefusedMode(ctx context.Context, client engines.RuntimeClient, caps engines.EngineRuntimeCapabilities, sess store.Session, refused *engines.RuntimeControlRefused) error {
	mode := *sess.PermissionMode
	log := a.logger(ctx, sess.ID).With(zap.String("permission_mode", mode))
	log.Warn("the Agent program refused the Session's permission mode; the runtime stays up",
		zap.String("program_code", refused.Code), zap.String("program_message", refused.Message))
	var settled *string
	if fallback := caps.PermissionModeDefaults[engines.SessionKind(sess.Kind)]; fallback != "" && fallback != mode {
		err := setPermissionMode(ctx, client, fallback)
		var again *engines.RuntimeControlRefused
		switch {
		case err == nil:
			settled = &fallback
		case errors.As(err, &again):
			log.Warn("the Agent program refused the default permission mode too; the mode is not known",
				zap.String("default_mode", fallback), zap.String("program_message", again.Message))
		default:
			return fmt.Errorf("apply default permission mode %q: %w", fallback, err)
		}
	}
	replaced, err := a.deps.Store.ReplaceSessionPermissionMode(ctx, sess.ID, mode, settled)
	if err != nil {
		return err
	}
	if !replaced {
		log.Info("the owner chose another permission mode meanwhile; it is applied next")
	}
	return nil
}

// setPermissionMode sets the mode on a client whose engine has permission modes.
func setPermissionMode(ctx context.Context, client engines.RuntimeClient, mode string) error {
	setter, ok := client.(engines.PermissionModeSetter)
	if !ok || mode == "" {
		return nil
	}
	if err := setter.SetPermissionMode(ctx, mode); err != nil {
		return fmt.Errorf("set permission mode %q: %w", mode, err)
	}
	return nil
}
