package loadbench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAHeapShareIsNeverBelowItsLiveObjects: each Session's share of the worker's
// spans in use is the difference of two readings taken at different moments; when
// the base reading holds more free slots, the difference falls below the live
// objects' share (or below zero), and the share reported is the live objects'.
func TestAHeapShareIsNeverBelowItsLiveObjects(t *testing.T) {
	base := heapFigures{inUse: 40 << 20, live: 20 << 20}
	for _, c := range []struct {
		name             string
		h                heapFigures
		wantIn, wantLive float64
	}{
		{"spans above the live objects", heapFigures{inUse: 40<<20 + 20*60<<10, live: 20<<20 + 20*30<<10}, 60, 30},
		{"spans below the live objects", heapFigures{inUse: 40<<20 + 20*10<<10, live: 20<<20 + 20*25<<10}, 25, 25},
		{"spans below the base", heapFigures{inUse: 40<<20 - 20<<10, live: 20<<20 + 20*25<<10}, 25, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, live := c.h.perSession(base, 20)
			assert.InDelta(t, c.wantIn, in, 0.01)
			assert.InDelta(t, c.wantLive, live, 0.01)
		})
	}
}
