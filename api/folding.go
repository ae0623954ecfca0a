package api

import (
	"encoding/base64"
	"strings"

	"github.com/gin-gonic/gin"
)

// processBlock is the data of a data-process-block header that replaces folded work.
type processBlock struct {
	BlockID    string `json:"block_id"`
	Cursor     string `json:"cursor"`
	ResponseID string `json:"response_id"`
	PartCount  int    `json:"part_count"`
	// Outcome is the response's recorded outcome; folding never changes it.
	Outcome           *string `json:"outcome"`
	ResponseCompleted bool    `json:"response_completed"`
}

// foldResponse splits an ended response's parts into the folded work and the parts
// that stay visible, following the console's display contract:
//   - an open response, and one with a tool awaiting approval, is not folded;
//   - a completed response folds everything before the text after its last tool call,
//     and only when such text exists; that text stays outside;
//   - a failed or cancelled response folds its finished work and body text; failed,
//     denied and unfinished tool calls, interaction and result (data) parts stay outside.
//
// It returns nil folded parts when nothing folds.
func foldResponse(m uiMessage) (folded, visible []map[string]any) {
	outcome, _ := m.Metadata["outcome"].(*string)
	if outcome == nil {
		return nil, m.Parts
	}
	lastTool := -1
	for i, p := range m.Parts {
		if isToolPart(p) {
			if p["state"] == "approval-requested" {
				return nil, m.Parts
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
			return nil, m.Parts
		}
		return m.Parts[:lastTool+1], m.Parts[lastTool+1:]
	}
	for _, p := range m.Parts {
		if staysOutside(p) {
			visible = append(visible, p)
		} else {
			folded = append(folded, p)
		}
	}
	if len(folded) == 0 {
		return nil, m.Parts
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

// blockID names the fold of one response; the cursor carries the same response and its
// part count, so a header addresses exactly the parts it replaced.
func blockID(responseID string) string { return responseID + ".work" }

func blockCursor(responseID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(responseID))
}

// listHistoryBlocks returns the conversation like /messages, with each response's
// folded work replaced by a data-process-block header at its place.
func (s *Server) listHistoryBlocks(c *gin.Context) {
	page, _, err := s.messagePage(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	for i, m := range page.Messages {
		if m.Role != "assistant" {
			continue
		}
		folded, visible := foldResponse(m)
		if folded == nil {
			continue
		}
		outcome, _ := m.Metadata["outcome"].(*string)
		header := map[string]any{"type": "data-process-block", "id": blockID(m.ID), "data": processBlock{
			BlockID: blockID(m.ID), Cursor: blockCursor(m.ID), ResponseID: m.ID, PartCount: len(folded),
			Outcome: outcome, ResponseCompleted: outcome != nil && *outcome == "completed",
		}}
		page.Messages[i].Parts = append([]map[string]any{header}, visible...)
	}
	writeOK(c, page)
}

// getHistoryBlock returns the parts folded under one header.
func (s *Server) getHistoryBlock(c *gin.Context) {
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := knownQuery(c, "cursor"); err != nil {
		s.fail(c, err)
		return
	}
	block := c.Param("block_id")
	responseID, ok := strings.CutSuffix(block, ".work")
	raw, err := base64.RawURLEncoding.DecodeString(c.Query("cursor"))
	if !ok || err != nil || string(raw) != responseID {
		s.fail(c, InvalidRequest("cursor", "does not address block %q", block))
		return
	}
	ctx := c.Request.Context()
	responses, err := s.store.ListResponses(ctx, sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, r := range responses {
		if r.ResponseID != responseID {
			continue
		}
		m, err := s.responseWithParts(c, sess.ID, r)
		if err != nil {
			s.fail(c, err)
			return
		}
		folded, _ := foldResponse(m)
		if folded == nil {
			break
		}
		writeOK(c, map[string]any{"block_id": block, "response_id": responseID, "parts": folded})
		return
	}
	s.fail(c, NotFound("history block "+block))
}
