package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// heldPrompts are the prompts a client holds for a program that refuses a prompt while
// one runs (BusyRefused): each is sent once the program answered the prompt before it.
// Holding is custody, not loss: the platform keeps each input until the program admits
// it, and hands a replacement runtime the unadmitted ones again.
type heldPrompts struct {
	mu sync.Mutex
	// queue are the held prompts in the order they were submitted.
	queue []heldPrompt
	// lastSent is the input id of the newest prompt written to the program.
	lastSent string
	// delivering is set while a goroutine sends the queue.
	delivering bool
}

// heldPrompt is one held session/prompt line.
type heldPrompt struct {
	inputID string
	line    []byte
}

// ids returns the held input ids in order.
func (h *heldPrompts) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.queue))
	for _, p := range h.queue {
		out = append(out, p.inputID)
	}
	return out
}

// submitWhenIdle writes the prompt now when the program runs no prompt and none is held,
// and otherwise holds it behind the others. Submitting an input again changes nothing.
func (c *Client) submitWhenIdle(ctx context.Context, inputID string, line []byte) error {
	h := &c.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.ContainsFunc(h.queue, func(p heldPrompt) bool { return p.inputID == inputID }) {
		return nil
	}
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("acp submit %s: %w", inputID, err)
	}
	if st.sent(inputID) {
		return nil
	}
	// A prompt written is running until its reply is in the journal; one not yet echoed
	// there is running too.
	busy := len(st.Prompts) > 0 || (h.lastSent != "" && !st.sent(h.lastSent))
	if !busy && len(h.queue) == 0 {
		if err := c.proc.WriteStdin(ctx, idPrefixPrompt+inputID, line); err != nil {
			return fmt.Errorf("acp submit %s: %w", inputID, err)
		}
		h.lastSent = inputID
		return nil
	}
	h.queue = append(h.queue, heldPrompt{inputID: inputID, line: line})
	if !h.delivering {
		h.delivering = true
		go c.deliverHeld(context.WithoutCancel(ctx))
	}
	return nil
}

// deliverHeld sends the held prompts one at a time, each after the program answered the
// one before it. It outlives Close (the program keeps running and the held inputs are
// the platform's), and ends when the queue is empty or the program exited.
func (c *Client) deliverHeld(ctx context.Context) {
	h := &c.hold
	for {
		h.mu.Lock()
		waitFor := h.lastSent
		h.mu.Unlock()
		if waitFor != "" && !c.awaitReply(ctx, waitFor) {
			h.mu.Lock()
			h.delivering = false
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.delivering = false
			h.mu.Unlock()
			return
		}
		next := h.queue[0]
		err := c.proc.WriteStdin(ctx, idPrefixPrompt+next.inputID, next.line)
		if err != nil {
			// The program is gone: the platform redelivers what it never admitted.
			h.delivering = false
			h.mu.Unlock()
			return
		}
		h.queue = h.queue[1:]
		h.lastSent = next.inputID
		h.mu.Unlock()
	}
}

// awaitReply follows the journal until the program answered the input's prompt; false
// when the program ended first.
func (c *Client) awaitReply(ctx context.Context, inputID string) bool {
	want, _ := json.Marshal(idPrefixPrompt + inputID)
	for out, err := range c.proc.ReadOutput(ctx, 0, true) {
		if err != nil {
			return false
		}
		jl, ok := parseJournalLine(out.Data)
		if ok && !jl.sent && jl.msg.isReply() && string(jl.msg.ID) == string(want) {
			return true
		}
	}
	return false
}
