package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// blobStorage is the runtime-state capability the platform issues to one owner: the
// runtime_state_blobs rows of its scope and owner id, nothing else.
type blobStorage struct {
	st      *store.Store
	scope   engines.RuntimeStateScope
	ownerID string
}

var _ engines.RuntimeStateStorage = blobStorage{}

// Save implements engines.RuntimeStateStorage; it returns once the row is committed.
func (b blobStorage) Save(ctx context.Context, name string, predecessor int64, data []byte) (int64, error) {
	saved, err := b.st.PutRuntimeStateBlob(ctx, string(b.scope), b.ownerID, name, data, predecessor)
	if errors.Is(err, store.ErrVersionConflict) {
		return 0, fmt.Errorf("save runtime state %q of %s %s: %w", name, b.scope, b.ownerID, engines.ErrRuntimeStateSuperseded)
	}
	if err != nil {
		return 0, fmt.Errorf("save runtime state %q: %w", name, err)
	}
	return saved.Generation, nil
}

// Load implements engines.RuntimeStateStorage.
func (b blobStorage) Load(ctx context.Context, name string) ([]byte, int64, error) {
	blob, err := b.st.GetRuntimeStateBlob(ctx, string(b.scope), b.ownerID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, fmt.Errorf("load runtime state %q of %s %s: %w", name, b.scope, b.ownerID, engines.ErrNoRuntimeState)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load runtime state %q: %w", name, err)
	}
	return blob.Data, blob.Generation, nil
}

// callbackCredentials issues the callback material the adapter's
// StartupMaterialRequest asks for. Runtime-state storage is owned by the Agent's
// workspace, or by the Session when the engine declares session scope.
func (a *Activities) callbackCredentials(sess store.Session, adapter engines.EngineAdapter) []engines.ScopedCallbackCredential {
	var out []engines.ScopedCallbackCredential
	for _, scope := range adapter.StartupMaterialRequest().Scopes() {
		switch scope {
		case engines.CallbackRuntimeStateStorage:
			st := blobStorage{st: a.deps.Store, scope: adapter.Capabilities().EffectiveRuntimeStateScope(), ownerID: sess.AgentID}
			if st.scope == engines.RuntimeStateScopeSession {
				st.ownerID = sess.ID
			}
			out = append(out, engines.ScopedCallbackCredential{Scope: scope, Owner: string(st.scope) + ":" + st.ownerID, RuntimeState: st})
		}
	}
	return out
}

// saveRuntimeState is the save barrier of an engine declaring RuntimeStateStore: its
// client saves the native state into custody before the platform lets the box go.
func saveRuntimeState(ctx context.Context, l *liveRuntime) error {
	if !l.caps.RuntimeStateStore {
		return nil
	}
	saver, ok := l.client.(engines.RuntimeStateSaver)
	if !ok {
		// Registration checks the declared client type; a client of another type
		// cannot be trusted to have saved anything.
		return fmt.Errorf("runtime client %T of engine %s declares runtime_state_store but cannot save", l.client, l.caps.EngineKind)
	}
	if err := saver.SaveRuntimeState(ctx); err != nil {
		return fmt.Errorf("save native runtime state: %w", err)
	}
	return nil
}

// saveRequired settles an activation the adapter failed with RuntimeStateSaveRequired:
// the box still holds native state that is not in custody, so the Session says which
// box and account, and the activation fails without anything releasing the box; the
// workflow reconnects to that same box, and a Session that keeps failing ends
// TERMINATED with its box kept for recovery.
func (a *Activities) saveRequired(ctx context.Context, sessionID string, required *engines.RuntimeStateSaveRequired) error {
	reason := fmt.Sprintf("the native runtime state in box %s (account %s) is not saved yet; the box is kept for recovery: %v",
		required.SandboxID, required.RuntimeIdentity.Account, required.Cause)
	if err := a.deps.Store.SetSessionRuntimeError(ctx, sessionID, reason); err != nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(reason, ErrTypeRuntimeStateSaveRequired, required)
}
