package loadbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The load generator's box uids lie above every range the tests take
// (sandbox/local/localtest hands out 400000-449999), in slots held with flock so
// two load runs on one machine never share accounts.
const (
	uidSlotFirst = 700000
	uidSlotSize  = 4000
	uidSlots     = 20
)

// uidSlot is one held slot: its first half for the stack's worker(s), its second
// half for the program floor's own backend.
type uidSlot struct {
	first   int
	release func()
}

func takeUIDSlot() (uidSlot, error) {
	dir := filepath.Join(os.TempDir(), "astrabox-bench-uids")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return uidSlot{}, fmt.Errorf("uid slot folder: %w", err)
	}
	for i := range uidSlots {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return uidSlot{}, fmt.Errorf("uid slot lock: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			continue
		}
		if err != nil {
			f.Close()
			return uidSlot{}, fmt.Errorf("uid slot lock: %w", err)
		}
		return uidSlot{first: uidSlotFirst + i*uidSlotSize, release: func() { f.Close() }}, nil
	}
	return uidSlot{}, errors.New("every load generator uid slot is taken: another run holds them")
}

// stack is the half of the slot the platform's workers use.
func (u uidSlot) stack() (first, count int) { return u.first, uidSlotSize / 2 }

// floor is the half of the slot the program floor's backend uses.
func (u uidSlot) floor() (first, count int) { return u.first + uidSlotSize/2, uidSlotSize / 2 }
