package api

import (
	"encoding/json"
	"time"

	"github.com/gin-gonic/gin"
)

// diagnosticView is one runtime diagnostic as an administrator reads it: the raw
// vendor evidence the platform kept instead of translating it.
type diagnosticView struct {
	Seq       int64           `json:"seq"`
	EventType string          `json:"event_type"`
	Raw       json.RawMessage `json:"raw"`
	CreatedAt time.Time       `json:"created_at"`
}

// listDiagnostics serves GET /admin/sessions/{id}/diagnostics: the Session's kept
// runtime diagnostics, oldest first. They are operator evidence (raw program output),
// so only administrators read them, and no browser stream ever carries them.
func (s *Server) listDiagnostics(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	rows, err := s.store.ListRuntimeDiagnostics(c.Request.Context(), sess.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]diagnosticView, len(rows))
	for i, r := range rows {
		out[i] = diagnosticView{Seq: r.Seq, EventType: r.EventType, Raw: r.Raw, CreatedAt: r.CreatedAt}
	}
	writeOK(c, out)
}
