package store

import (
	"context"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/astrabox/astrabox/store/pubsub"
)

// NewInput is a person's message to accept into custody.
type NewInput struct {
	SessionID string
	// ClientMessageID, when set, makes the input idempotent within its Session.
	ClientMessageID *string
	Content         string
}

// inputClientMessageIDKey is the partial unique index on (session_id,
// client_message_id): its violation is a repeated client_message_id.
const inputClientMessageIDKey = "inputs_client_message_id_key"

// insertInputSQL accepts an input in one statement, so one round trip: it advances the
// Session's input_seq (the row lock that orders the Session's inputs: a concurrent
// insert waits for this one to commit and then reads the advanced seq), inserts the
// input with that seq and queues the notification (a pubsub.InputNotice, which
// carries the content when it fits and the Session is neither archived nor deleted:
// its runtime may still be live while the workflow tears it down, and the Relay's
// read of the held inputs lists none of such a Session's), which PostgreSQL delivers
// at commit. A repeated client_message_id violates inputClientMessageIDKey, which fails
// the whole statement, the seq advance with it, so seqs stay gapless. No row means no
// such Session, or, with a guard (insertGuardedInputSQL), one the guard refused.
//
// It also says whether a live Relay hands the input over on that notification: the
// Session's inputs_on_notice_lease, read from the row it locked (so as a release that
// cleared it left it), names the reader lease of a Relay that listens, and that lease
// is unexpired; and the Session's output position as it locked it (output_seq).
const insertInputSQL = insertInputAdvance + `WHERE id = @session_id` + insertInputRest

// insertGuardedInputSQL is insertInputSQL accepting the input only into a Session that
// InputGuard admits: the caller's own, neither terminated nor deleted, and holding fewer
// inputs than the cap. The conditions are on the row the advance locks, so a lifecycle
// change committed meanwhile is seen; the held count, as a read before the insert
// would be, is a moment's.
const insertGuardedInputSQL = insertInputAdvance + `WHERE id = @session_id AND user_id = @owner_id
		AND deleted_at IS NULL AND lifecycle NOT IN (@terminated, @deleted)
		AND (@max_held = 0 OR (SELECT count(*) FROM inputs
			WHERE inputs.session_id = @session_id AND inputs.state IN @held_states) < @max_held)` + insertInputRest

const insertInputAdvance = `
WITH advanced AS (
	UPDATE sessions SET input_seq = input_seq + 1, updated_at = now()
	`

const insertInputRest = `
	RETURNING input_seq, inputs_on_notice_lease, (archived_at IS NULL AND lifecycle <> @deleted) AS open,
		COALESCE((SELECT o.output_seq FROM session_outputs o WHERE o.session_id = sessions.id), 0) AS output_seq
), inserted AS (
	INSERT INTO inputs (id, session_id, seq, client_message_id, content, state)
	SELECT CAST(@id AS uuid), CAST(@session_id AS uuid), input_seq, CAST(@client_message_id AS text), @content, @state
	FROM advanced
	RETURNING *
), notified AS (
	SELECT pg_notify(@channel, CAST(seq AS text) || ' ' || CAST(id AS text) ||
		CASE WHEN advanced.open AND octet_length(content) <= @max_notice_content THEN ' ' || content ELSE '' END)
	FROM inserted, advanced
)
SELECT inserted.*, advanced.output_seq AS session_output_seq, EXISTS (
	SELECT 1 FROM reader_leases l
	WHERE l.session_id = CAST(@session_id AS uuid) AND l.generation = advanced.inputs_on_notice_lease AND l.expires_at > now()
) AS relay_listens
FROM inserted, notified, advanced`

// InputGuard is what AcceptGuardedInput checks in the statement that accepts the input.
type InputGuard struct {
	// OwnerID is the user the Session must belong to.
	OwnerID string
	// MaxHeld refuses an input to a Session already holding this many inputs the
	// program has not taken (pending or delivered); zero sets no cap.
	MaxHeld int
}

// Accepted is an input taken into custody.
type Accepted struct {
	Input Input
	// OutputSeq is the Session's output position when the input was accepted, its
	// response's parts following it; for a Duplicate, the position when the first
	// input was looked up.
	OutputSeq int64
	// Duplicate: the ClientMessageID was taken; Input is the first input.
	Duplicate bool
	// RelayListens: a live Relay listens for the Session's inputs and hands this one
	// to the runtime on its notification (SetInputsOnNotice), so the Session's
	// workflow needs no signal for it.
	RelayListens bool
}

// acceptedRow is a row insertInputSQL returns.
type acceptedRow struct {
	Input        `gorm:"embedded"`
	OutputSeq    int64 `gorm:"column:session_output_seq"`
	RelayListens bool  `gorm:"column:relay_listens"`
}

// InsertInput accepts an input as AcceptInput does, for callers that do not ask
// whether a Relay hands it over on notice.
func (s *Store) InsertInput(ctx context.Context, in NewInput) (Input, bool, error) {
	a, err := s.AcceptInput(ctx, in)
	return a.Input, a.Duplicate, err
}

// AcceptInput accepts an input: it is durable when AcceptInput returns. The same
// ClientMessageID in the same Session returns the first input as a Duplicate, also
// under concurrent calls: the partial unique index (session_id, client_message_id)
// decides, not a read before the write. A new input gets the next accepted-order seq
// and wakes the Session's reader through SessionInputsChannel, in the same
// statement. Inside a transaction, a duplicate aborts it (the statement failed);
// callers use it outside one.
func (s *Store) AcceptInput(ctx context.Context, in NewInput) (Accepted, error) {
	a, found, err := s.acceptInput(ctx, in, insertInputSQL, nil)
	if err == nil && !found {
		err = fmt.Errorf("insert input: session %s: %w", in.SessionID, ErrNotFound)
	}
	return a, err
}

// AcceptGuardedInput is AcceptInput into a Session the guard admits, decided in the
// same statement; admitted is false, and nothing is written, when there is no such
// Session or the guard refuses the input. A repeated ClientMessageID returns the first
// input as a Duplicate when the guard admits it; one the guard refuses is refused as
// any input is (the caller looks the first one up).
func (s *Store) AcceptGuardedInput(ctx context.Context, in NewInput, guard InputGuard) (a Accepted, admitted bool, err error) {
	return s.acceptInput(ctx, in, insertGuardedInputSQL, map[string]any{
		"owner_id":    guard.OwnerID,
		"max_held":    guard.MaxHeld,
		"held_states": heldInputs,
		"terminated":  LifecycleTerminated,
	})
}

// acceptInput runs statement, insertInputSQL or a guarded form of it, with extra
// arguments besides the input's; found is false when it wrote no row.
func (s *Store) acceptInput(ctx context.Context, in NewInput, statement string, extra map[string]any) (Accepted, bool, error) {
	args := map[string]any{
		"id":                 uuid.NewString(),
		"session_id":         in.SessionID,
		"client_message_id":  in.ClientMessageID,
		"content":            in.Content,
		"state":              InputPending,
		"channel":            pubsub.SessionInputsChannel(in.SessionID),
		"max_notice_content": pubsub.MaxNoticeContent,
		"deleted":            LifecycleDeleted,
	}
	maps.Copy(args, extra)
	var rows []acceptedRow
	err := scanRaw(s.conn(ctx), &rows, statement, args)
	if isUniqueViolation(err, inputClientMessageIDKey) && in.ClientMessageID != nil {
		// The client_message_id is taken: the first input is the answer, with the
		// Session's output position. The violation is raised only once the first
		// input committed, so this new statement sees it.
		var found []acceptedRow
		err := scanRaw(s.conn(ctx), &found, `SELECT i.*, COALESCE(o.output_seq, 0) AS session_output_seq FROM inputs i
			LEFT JOIN session_outputs o ON o.session_id = i.session_id WHERE i.session_id = ? AND i.client_message_id = ? LIMIT 1`,
			in.SessionID, *in.ClientMessageID)
		if err != nil {
			return Accepted{}, false, mapError("insert input: find the first input", err)
		}
		if len(found) == 0 {
			return Accepted{}, false, fmt.Errorf("insert input: conflict without a matching row")
		}
		return Accepted{Input: found[0].Input, OutputSeq: found[0].OutputSeq, Duplicate: true}, true, nil
	}
	if err != nil {
		return Accepted{}, false, mapError("insert input", err)
	}
	if len(rows) == 0 {
		return Accepted{}, false, nil
	}
	return Accepted{Input: rows[0].Input, OutputSeq: rows[0].OutputSeq, RelayListens: rows[0].RelayListens}, true, nil
}

// SetInputsOnNotice records that the Relay of leaseGeneration listens for the
// Session's inputs and hands each over on its notification: from its commit the API
// signals no workflow for a new input while that lease is unexpired. A superseded or
// expired lease, or a released runtime (a Relay the workflow stopped may still be
// ending), records nothing (ErrLeaseLost).
func (s *Store) SetInputsOnNotice(ctx context.Context, sessionID string, leaseGeneration int64) error {
	res := s.conn(ctx).Exec(`
		UPDATE sessions SET inputs_on_notice_lease = @lease
		WHERE id = @id AND NOT runtime_unavailable AND EXISTS (
			SELECT 1 FROM reader_leases WHERE session_id = @id AND generation = @lease AND expires_at > now())`,
		map[string]any{"id": sessionID, "lease": leaseGeneration})
	if res.Error != nil {
		return mapError("set inputs on notice", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("set inputs on notice for session %s generation %d: %w", sessionID, leaseGeneration, ErrLeaseLost)
	}
	return nil
}

// ClearInputsOnNotice records that the Relay of leaseGeneration no longer listens for
// the Session's inputs; a later lease's record stays.
func (s *Store) ClearInputsOnNotice(ctx context.Context, sessionID string, leaseGeneration int64) error {
	err := s.conn(ctx).Exec(`UPDATE sessions SET inputs_on_notice_lease = NULL WHERE id = ? AND inputs_on_notice_lease = ?`,
		sessionID, leaseGeneration).Error
	return mapError("clear inputs on notice", err)
}

func (s *Store) findInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (*Input, error) {
	var found []Input
	err := s.conn(ctx).Where("session_id = ? AND client_message_id = ?", sessionID, clientMessageID).Limit(1).Find(&found).Error
	if err != nil {
		return nil, mapError("find input by client message id", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	return &found[0], nil
}

// ListInputsBySession returns a Session's inputs in accepted order.
func (s *Store) ListInputsBySession(ctx context.Context, sessionID string) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("seq").Find(&out).Error
	return out, mapError("list inputs by session", err)
}

// heldInputs are the states of an input the program has not taken yet.
var heldInputs = []string{InputPending, InputDelivered}

// CountHeldInputs counts the Session's held inputs.
func (s *Store) CountHeldInputs(ctx context.Context, sessionID string) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND state IN ?", sessionID, heldInputs).Count(&n).Error
	return int(n), mapError("count held inputs", err)
}

// GetSessionWithHeldInputs returns the Session and how many inputs it holds (pending or
// delivered) in one statement: what a receipt's admission decides on. Like
// CountHeldInputs before an insert, the count is a moment's, not a lock's.
func (s *Store) GetSessionWithHeldInputs(ctx context.Context, id string) (Session, int, error) {
	var held int64
	sess, found, err := s.getSessionWith(ctx, `SELECT `+sessionColumns+`, (SELECT count(*) FROM inputs
			WHERE inputs.session_id = s.id AND inputs.state = ANY(CAST(@held_states AS text[]))) AS held_inputs
		FROM `+sessionsWithOutput+` WHERE s.id = @id`, map[string]any{"held_states": heldInputs, "id": id}, &held)
	if err != nil {
		return Session{}, 0, mapError("get session with held inputs", err)
	}
	if !found {
		return Session{}, 0, fmt.Errorf("get session %s with held inputs: %w", id, ErrNotFound)
	}
	return sess, int(held), nil
}

// GetInputByClientMessageID returns the Session's input with this client_message_id.
func (s *Store) GetInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (Input, error) {
	found, err := s.findInputByClientMessageID(ctx, sessionID, clientMessageID)
	if err != nil {
		return Input{}, err
	}
	if found == nil {
		return Input{}, fmt.Errorf("get input %q of session %s: %w", clientMessageID, sessionID, ErrNotFound)
	}
	return *found, nil
}

// notify sends a NOTIFY that PostgreSQL delivers when the transaction commits.
func (s *Store) notify(ctx context.Context, channel, payload string) error {
	if err := s.conn(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error; err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}
