package engines

import (
	"context"
	"errors"
)

// RuntimeStateStorage is the platform's custody of one owner's native runtime state,
// for engines whose native state is not a JSONL log (RuntimeStateStore). It is the
// capability of a CallbackRuntimeStateStorage credential: bound to the credential's
// owner, it reaches that owner's state and nothing else. Each name holds one opaque
// blob with a generation that grows by one per save.
type RuntimeStateStorage interface {
	// Save stores data under name in place of generation predecessor (0 when none is
	// saved yet) and returns the new generation once the bytes are in the platform's
	// database: only then may the engine publish a reference to them. A predecessor that
	// is not the current generation gives ErrRuntimeStateSuperseded and saves nothing:
	// another writer (an older or newer incarnation) saved since.
	Save(ctx context.Context, name string, predecessor int64, data []byte) (generation int64, err error)
	// Load returns the saved data under name and its generation, or
	// ErrNoRuntimeState when nothing is saved under it.
	Load(ctx context.Context, name string) (data []byte, generation int64, err error)
}

// RuntimeStateSaver is implemented by the runtime client of an engine declaring
// RuntimeStateStore (registration checks it). The platform calls SaveRuntimeState
// before it releases the box (idle release, archive, delete): the client stops native
// writers as it must, saves every required native byte through its
// RuntimeStateStorage and returns only once they are in custody. An error keeps the
// box and fails the release attempt, which is retried.
type RuntimeStateSaver interface {
	SaveRuntimeState(ctx context.Context) error
}

var (
	// ErrNoRuntimeState: nothing is saved under the name.
	ErrNoRuntimeState = errors.New("no runtime state saved")
	// ErrRuntimeStateSuperseded: the predecessor generation of a save is not current.
	ErrRuntimeStateSuperseded = errors.New("runtime state superseded")
)
