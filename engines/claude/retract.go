package claude

import (
	"slices"

	"github.com/astrabox/astrabox/engines"
)

// abandon withdraws what Claude streamed of a message it gave up. Claude Code 2.1.328
// marks such a message's message_stop with abandoned_blocks: after a broken model
// stream (an error event or a dropped connection) it asks the model again and streams
// or sends the whole reply anew, and on an interrupt it keeps only the blocks its
// assistant lines confirmed. The text and reasoning previews of the abandoned blocks
// are retracted, so the response displays the reply once.
func (t *translator) abandon(a abandonedBlocks) {
	r := t.st.Resp
	if r == nil || a.APIMessageID != r.Msg {
		return
	}
	// Claude stops every block before message_stop; a block still open is closed
	// first, so the withdrawn part is a whole part.
	for _, p := range r.Previews {
		if b, open := r.Blocks[p.Index]; open && p.Index >= a.FromBlockIndex {
			t.endBlock(b)
			delete(r.Blocks, p.Index)
		}
	}
	withdrawn := false
	for _, p := range r.Previews {
		if p.Index >= a.FromBlockIndex && !slices.Contains(r.Retracted, p.ID) {
			r.Retracted = append(r.Retracted, p.ID)
			withdrawn = true
		}
	}
	r.Previews = slices.DeleteFunc(r.Previews, func(p preview) bool { return p.Index >= a.FromBlockIndex })
	if withdrawn {
		t.output(engines.RetractionFrame(r.Retracted))
	}
}
