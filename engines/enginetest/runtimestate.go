package enginetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/astrabox/astrabox/engines"
)

// MemoryRuntimeState is runtime-state storage held in memory for an engine package's
// live tests, with the platform's semantics (engines.RuntimeStateStorage): a save names
// the generation it replaces and is refused when another save came first. The
// platform's own storage, in PostgreSQL, is tested in activities.
type MemoryRuntimeState struct {
	mu    sync.Mutex
	blobs map[string]memoryBlob
}

type memoryBlob struct {
	data       []byte
	generation int64
}

var _ engines.RuntimeStateStorage = (*MemoryRuntimeState)(nil)

// NewMemoryRuntimeState returns empty storage.
func NewMemoryRuntimeState() *MemoryRuntimeState {
	return &MemoryRuntimeState{blobs: map[string]memoryBlob{}}
}

// Save implements engines.RuntimeStateStorage.
func (m *MemoryRuntimeState) Save(_ context.Context, name string, predecessor int64, data []byte) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.blobs[name].generation; cur != predecessor {
		return 0, fmt.Errorf("save %q over generation %d (current %d): %w", name, predecessor, cur, engines.ErrRuntimeStateSuperseded)
	}
	b := memoryBlob{data: append([]byte{}, data...), generation: predecessor + 1}
	m.blobs[name] = b
	return b.generation, nil
}

// Load implements engines.RuntimeStateStorage.
func (m *MemoryRuntimeState) Load(_ context.Context, name string) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[name]
	if !ok {
		return nil, 0, fmt.Errorf("load %q: %w", name, engines.ErrNoRuntimeState)
	}
	return append([]byte{}, b.data...), b.generation, nil
}

// Credentials are the callback credentials a startup context carries for an engine
// whose startup material asks for runtime-state storage, with this storage.
func (m *MemoryRuntimeState) Credentials(owner string) []engines.ScopedCallbackCredential {
	return []engines.ScopedCallbackCredential{{Scope: engines.CallbackRuntimeStateStorage, Owner: owner, RuntimeState: m}}
}
