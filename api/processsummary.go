package api

import (
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"
)

// Process-summary statuses: whether label generation for a block finished. They say
// nothing of the response's outcome (response_completed and outcome do).
const (
	// summaryCompleted: the label is generated from the block's final content.
	summaryCompleted = "completed"
	// summaryPending: the response is still open, so its work may grow; no label yet.
	summaryPending = "pending"
)

// operationCount is one kind of operation a folded block holds and how often.
type operationCount struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// processSummary names the operations folded under one data-process-block header.
type processSummary struct {
	BlockID    string `json:"block_id"`
	ResponseID string `json:"response_id"`
	// Status is completed once label generation finished, pending before.
	Status string `json:"status"`
	// Label is one line naming the operations; null while pending.
	Label      *string          `json:"label"`
	Operations []operationCount `json:"operations"`
	// Outcome and NativeReason are the response's recorded ending (null while open);
	// ResponseCompleted is true only for a completed response, whatever the label.
	Outcome           *string `json:"outcome"`
	NativeReason      *string `json:"native_reason"`
	ResponseCompleted bool    `json:"response_completed"`
}

// getProcessSummary labels the work folded under one header. The label names
// operations (tool calls by name, reasoning); it is generated from the recorded parts,
// once the response ended. It is never the response's outcome.
func (s *Server) getProcessSummary(c *gin.Context) {
	m, block, blocks, err := s.findHistoryBlock(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	outcome, _ := m.Metadata["outcome"].(*string)
	reason, _ := m.Metadata["native_reason"].(*string)
	sum := processSummary{
		BlockID: block, ResponseID: m.ID, Status: summaryPending,
		Operations: operationsOf(expandBlocks(blocks[block], blocks)),
		Outcome:    outcome, NativeReason: reason,
		ResponseCompleted: outcome != nil && *outcome == "completed",
	}
	if outcome != nil {
		label := operationsLabel(sum.Operations)
		sum.Status, sum.Label = summaryCompleted, &label
	}
	writeOK(c, sum)
}

// operationsOf counts the operations among parts, in order of first appearance.
func operationsOf(parts []map[string]any) []operationCount {
	out := []operationCount{}
	at := map[string]int{}
	for _, p := range parts {
		var name string
		switch {
		case isToolPart(p):
			name, _ = p["toolName"].(string)
			if name == "" {
				name = strings.TrimPrefix(p["type"].(string), "tool-")
			}
		case p["type"] == "reasoning":
			name = "reasoning"
		default:
			continue
		}
		if i, ok := at[name]; ok {
			out[i].Count++
			continue
		}
		at[name] = len(out)
		out = append(out, operationCount{Name: name, Count: 1})
	}
	return out
}

// operationsLabel is the one-line label of operations, e.g. "Bash ×2, Read, reasoning".
func operationsLabel(ops []operationCount) string {
	if len(ops) == 0 {
		return "No operations"
	}
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.Name
		if op.Count > 1 {
			names[i] = fmt.Sprintf("%s ×%d", op.Name, op.Count)
		}
	}
	return strings.Join(names, ", ")
}
