package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sessionsWithOutput is what a Session is read from: its row (as s) and its output
// position (as o), which its Relays keep in a row of their own (session_outputs) so
// that a Relay's write never locks the row an input's receipt locks.
const sessionsWithOutput = `sessions s LEFT JOIN session_outputs o ON o.session_id = s.id`

// sessionColumns are a Session's columns read from sessionsWithOutput, named as
// Session's fields and in the order sessionFields scans them. The reads on the API's
// hot paths (an input's receipt, a stream's opening) scan a Session with these
// instead of through GORM's reflection, which made most of such a read's allocations
// and CPU. The Session's updated_at moves with its output as with its own changes.
const sessionColumns = `s.id, s.agent_id, s.user_id, s.kind, s.title, s.title_source, s.permission_mode,
	s.lifecycle, s.runtime_status, s.runtime_unavailable, s.archived_at, s.deleted_at,
	s.engine_session_key, s.sandbox_id, s.host_task_queue, s.runtime_generation, s.runtime_info,
	s.runtime_error, s.model_credential_owner, s.model_name, s.resume_material,
	COALESCE(o.output_seq, 0) AS output_seq, s.input_seq, o.last_output_at, s.read_at, s.last_activity_at,
	s.created_at, GREATEST(s.updated_at, o.last_output_at) AS updated_at`

// sessionFields are the scan destinations of sessionColumns in x.
func sessionFields(x *Session) []any {
	return []any{&x.ID, &x.AgentID, &x.UserID, &x.Kind, &x.Title, &x.TitleSource, &x.PermissionMode,
		&x.Lifecycle, &x.RuntimeStatus, &x.RuntimeUnavailable, &x.ArchivedAt, &x.DeletedAt,
		&x.EngineSessionKey, &x.SandboxID, &x.HostTaskQueue, &x.RuntimeGeneration, (*[]byte)(&x.RuntimeInfo),
		&x.RuntimeError, &x.ModelCredentialOwner, &x.ModelName, &x.ResumeMaterial, &x.OutputSeq,
		&x.InputSeq, &x.LastOutputAt, &x.ReadAt, &x.LastActivityAt, &x.CreatedAt, &x.UpdatedAt}
}

// getSessionWith reads one Session with sessionColumns and the extra columns query
// selects after them (into extra). query selects from sessionsWithOutput and names its
// arguments (@name, from args); it reports false when no row matched. The reads it
// serves (an input's receipt, a stream's opening, a Relay's observation) are among
// the API's and the worker's most frequent, so it runs on the connection's own pgx
// API, without GORM's statement rendering and database/sql's wrapping; it is
// therefore not for a Store scoped to a transaction.
func (s *Store) getSessionWith(ctx context.Context, query string, args map[string]any, extra ...any) (Session, bool, error) {
	if s.inTx {
		return Session{}, false, errors.New("a Session read on its own connection, not in a transaction")
	}
	var sess Session
	found := false
	err := s.onPgxConn(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, query, pgx.NamedArgs(args)).Scan(append(sessionFields(&sess), extra...)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("scan session: %w", err)
		}
		found = true
		return nil
	})
	return sess, found, err
}
