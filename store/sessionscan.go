package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sessionColumns are the sessions table's columns (as s) in the order sessionFields
// scans them. The reads on the API's hot paths (an input's receipt, a stream's
// opening) scan a Session with these instead of through GORM's reflection, which
// made most of such a read's allocations and CPU.
const sessionColumns = `s.id, s.agent_id, s.user_id, s.kind, s.title, s.title_source, s.permission_mode,
	s.lifecycle, s.runtime_status, s.runtime_unavailable, s.archived_at, s.deleted_at,
	s.engine_session_key, s.sandbox_id, s.host_task_queue, s.runtime_generation, s.runtime_info,
	s.runtime_error, s.model_credential_owner, s.model_name, s.resume_material, s.output_seq,
	s.input_seq, s.last_output_at, s.read_at, s.last_activity_at, s.created_at, s.updated_at`

// sessionFields are the scan destinations of sessionColumns in x.
func sessionFields(x *Session) []any {
	return []any{&x.ID, &x.AgentID, &x.UserID, &x.Kind, &x.Title, &x.TitleSource, &x.PermissionMode,
		&x.Lifecycle, &x.RuntimeStatus, &x.RuntimeUnavailable, &x.ArchivedAt, &x.DeletedAt,
		&x.EngineSessionKey, &x.SandboxID, &x.HostTaskQueue, &x.RuntimeGeneration, (*[]byte)(&x.RuntimeInfo),
		&x.RuntimeError, &x.ModelCredentialOwner, &x.ModelName, &x.ResumeMaterial, &x.OutputSeq,
		&x.InputSeq, &x.LastOutputAt, &x.ReadAt, &x.LastActivityAt, &x.CreatedAt, &x.UpdatedAt}
}

// getSessionWith reads one Session with sessionColumns and the extra columns query
// selects after them (into extra). query selects from sessions as s and names its
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
