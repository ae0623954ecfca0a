package api

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Block kinds of a data-process-block header.
const (
	// blockResponse folds a whole response's work and body text.
	blockResponse = "response"
	// blockGroup folds one run of tool and reasoning entries.
	blockGroup = "group"
)

// processBlock is the data of a data-process-block header that replaces folded work.
type processBlock struct {
	BlockID    string `json:"block_id"`
	Cursor     string `json:"cursor"`
	Kind       string `json:"kind"`
	ResponseID string `json:"response_id"`
	PartCount  int    `json:"part_count"`
	// Outcome is the response's recorded outcome; folding never changes it.
	Outcome           *string `json:"outcome"`
	ResponseCompleted bool    `json:"response_completed"`
}

// indexedPart is a part with its position in the assembled message, which names the
// process group it starts.
type indexedPart struct {
	at   int
	part map[string]any
}

// foldResponse splits an ended response's parts into the work a whole-response header
// folds and the parts that stay visible, following the console's display contract:
//   - an open response, and one with a tool awaiting approval, is not folded;
//   - a completed response folds everything before the text after its last tool call,
//     and only when such text exists; that text stays outside;
//   - a failed or cancelled response folds its finished work and body text; failed,
//     denied and unfinished tool calls, interaction and result (data) parts stay outside.
//
// folded is nil when nothing folds.
func foldResponse(m uiMessage) (folded, visible []indexedPart) {
	all := make([]indexedPart, len(m.Parts))
	for i, p := range m.Parts {
		all[i] = indexedPart{i, p}
	}
	outcome, _ := m.Metadata["outcome"].(*string)
	if outcome == nil {
		return nil, all
	}
	lastTool := -1
	for i, p := range m.Parts {
		if isToolPart(p) {
			if p["state"] == "approval-requested" {
				return nil, all
			}
			lastTool = i
		}
	}
	if *outcome == "completed" {
		textAfter := false
		for _, p := range m.Parts[lastTool+1:] {
			textAfter = textAfter || p["type"] == "text"
		}
		if lastTool < 0 || !textAfter {
			return nil, all
		}
		return all[:lastTool+1], all[lastTool+1:]
	}
	for _, ip := range all {
		if staysOutside(ip.part) {
			visible = append(visible, ip)
		} else {
			folded = append(folded, ip)
		}
	}
	if len(folded) == 0 {
		return nil, all
	}
	return folded, visible
}

func isToolPart(p map[string]any) bool {
	t, _ := p["type"].(string)
	return t == "dynamic-tool" || strings.HasPrefix(t, "tool-")
}

// staysOutside names the parts an abnormal ending keeps visible.
func staysOutside(p map[string]any) bool {
	t, _ := p["type"].(string)
	switch {
	case isToolPart(p):
		return p["state"] != "output-available"
	case strings.HasPrefix(t, "data-"):
		return true
	}
	return false
}

// isWork names the entries an ordinary process group folds: tool calls (except one
// awaiting approval, which must stay answerable) and reasoning; step boundaries inside
// a run go with it.
func isWork(p map[string]any) bool {
	if isToolPart(p) {
		return p["state"] != "approval-requested"
	}
	return p["type"] == "reasoning"
}

// groupWork replaces each run of work entries with a process-group header and returns
// the parts to show and the groups' parts by block id.
func groupWork(m uiMessage, items []indexedPart) ([]map[string]any, map[string][]map[string]any) {
	out := []map[string]any{}
	groups := map[string][]map[string]any{}
	for i := 0; i < len(items); {
		j, work := i, 0
		for j < len(items) && (isWork(items[j].part) || items[j].part["type"] == "step-start") {
			if isWork(items[j].part) {
				work++
			}
			j++
		}
		if work == 0 {
			out = append(out, items[i].part)
			i++
			continue
		}
		id := m.ID + ".g" + strconv.Itoa(items[i].at)
		run := make([]map[string]any, 0, j-i)
		for _, ip := range items[i:j] {
			run = append(run, ip.part)
		}
		groups[id] = run
		out = append(out, blockHeader(m, id, blockGroup, len(run)))
		i = j
	}
	return out, groups
}

func blockHeader(m uiMessage, id, kind string, count int) map[string]any {
	outcome, _ := m.Metadata["outcome"].(*string)
	return map[string]any{"type": "data-process-block", "id": id, "data": processBlock{
		BlockID: id, Cursor: blockCursor(m.ID), Kind: kind, ResponseID: m.ID, PartCount: count,
		Outcome: outcome, ResponseCompleted: outcome != nil && *outcome == "completed",
	}}
}

// responseBlocks is a response's presentation: the visible parts, and every block's
// parts by id (a whole-response block holds its body text and process groups).
func responseBlocks(m uiMessage) ([]map[string]any, map[string][]map[string]any) {
	folded, visible := foldResponse(m)
	shown, blocks := groupWork(m, visible)
	if folded == nil {
		return shown, blocks
	}
	inner, innerGroups := groupWork(m, folded)
	for id, parts := range innerGroups {
		blocks[id] = parts
	}
	workID := m.ID + ".work"
	blocks[workID] = inner
	return append([]map[string]any{blockHeader(m, workID, blockResponse, len(folded))}, shown...), blocks
}

func blockCursor(responseID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(responseID))
}

// listHistoryBlocks returns the conversation like /messages, with folded work replaced
// by data-process-block headers at its place.
func (s *Server) listHistoryBlocks(c *gin.Context) {
	page, _, err := s.messagePage(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	for i, m := range page.Messages {
		if m.Role == "assistant" && m.Metadata["response_id"] != nil {
			page.Messages[i].Parts, _ = responseBlocks(m)
		}
	}
	writeOK(c, page)
}

// getHistoryBlock returns the parts folded under one header; the cursor names the
// response the block belongs to.
func (s *Server) getHistoryBlock(c *gin.Context) {
	m, block, blocks, err := s.findHistoryBlock(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, map[string]any{"block_id": block, "response_id": m.ID, "parts": blocks[block]})
}

// findHistoryBlock resolves the block a request addresses (block_id and cursor): the
// response it belongs to, assembled, the block's id, and the parts of every block of
// that response by id.
func (s *Server) findHistoryBlock(c *gin.Context) (uiMessage, string, map[string][]map[string]any, error) {
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		return uiMessage{}, "", nil, err
	}
	if err := knownQuery(c, "cursor"); err != nil {
		return uiMessage{}, "", nil, err
	}
	block := c.Param("block_id")
	raw, err := base64.RawURLEncoding.DecodeString(c.Query("cursor"))
	responseID := string(raw)
	if err != nil || responseID == "" || !strings.HasPrefix(block, responseID+".") {
		return uiMessage{}, "", nil, InvalidRequest("cursor", "does not address block %q", block)
	}
	responses, err := s.store.ListResponsesBySession(c.Request.Context(), sess.ID)
	if err != nil {
		return uiMessage{}, "", nil, err
	}
	for _, r := range responses {
		if r.ResponseID != responseID {
			continue
		}
		m, err := s.responseWithParts(c, sess.ID, r)
		if err != nil {
			return uiMessage{}, "", nil, err
		}
		if _, blocks := responseBlocks(m); blocks[block] != nil {
			return m, block, blocks, nil
		}
		break
	}
	return uiMessage{}, "", nil, NotFound("history block " + block)
}

// expandBlocks returns parts with every nested process-group header replaced by the
// parts it folds, for a summary of everything under a whole-response header.
func expandBlocks(parts []map[string]any, blocks map[string][]map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		if p["type"] == "data-process-block" {
			if id, _ := p["id"].(string); blocks[id] != nil {
				out = append(out, expandBlocks(blocks[id], blocks)...)
				continue
			}
		}
		out = append(out, p)
	}
	return out
}
