package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/engines"
)

// InputFailurePreparationRefused is the failure code of inputs held when the
// deployment's runtime preparation refused to start the Session's Agent program (a
// disabled RuntimeProfile, a missing secret or command, an engine not installed):
// retrying cannot start it, so the messages will not run.
const InputFailurePreparationRefused = "RUNTIME_PREPARATION_REFUSED"

// FailInputReported records a refusal of one held input, as MarkInputFailed does, and
// in the same transaction appends its data-input-failed part to the Session's output
// log, so a client following the stream learns why its message will not run whether
// or not a reader holds the lease. The part is written once, by whoever moved the
// input to failed.
func (s *Store) FailInputReported(ctx context.Context, sessionID, inputID, code, message string) (bool, error) {
	var failed bool
	err := s.InTx(ctx, func(tx *Store) error {
		var err error
		if failed, err = tx.MarkInputFailed(ctx, sessionID, inputID, code, message); err != nil || !failed {
			return err
		}
		return tx.appendPlatformParts(ctx, sessionID, []string{inputID}, code, message)
	})
	if err != nil {
		return false, fmt.Errorf("fail input %s: %w", inputID, err)
	}
	return failed, nil
}

// FailHeldInputsReported fails every held input of the Session with code, as
// FailHeldInputs does, and appends one data-input-failed part for each, in accepted
// order, in the same transaction. It returns the failed ids.
func (s *Store) FailHeldInputsReported(ctx context.Context, sessionID, code, message string) ([]string, error) {
	var ids []string
	err := s.InTx(ctx, func(tx *Store) error {
		var err error
		if ids, err = tx.FailHeldInputs(ctx, sessionID, code, message); err != nil || len(ids) == 0 {
			return err
		}
		return tx.appendPlatformParts(ctx, sessionID, ids, code, message)
	})
	if err != nil {
		return nil, fmt.Errorf("fail held inputs of session %s: %w", sessionID, err)
	}
	return ids, nil
}

// appendPlatformParts appends the data-input-failed parts of inputIDs. They are the
// platform's own report, not a runtime's output, so they need no reader's lease
// generation; the lease row (when there is one) is locked like a reader's write locks
// it, so the parts are ordered with the reader's writes and take the next seqs.
func (s *Store) appendPlatformParts(ctx context.Context, sessionID string, inputIDs []string, code, message string) error {
	var leases []ReaderLease
	err := s.conn(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
		Where("session_id = ?", sessionID).Limit(1).Find(&leases).Error
	if err != nil {
		return mapError("lock reader lease", err)
	}
	parts := make([]NewPart, len(inputIDs))
	for i, id := range inputIDs {
		frame, err := json.Marshal(engines.InputFailedFrame(id, code, message))
		if err != nil {
			return fmt.Errorf("encode input failed part: %w", err)
		}
		parts[i] = NewPart{Frame: frame}
	}
	_, err = s.appendLocked(ctx, AppendRequest{SessionID: sessionID, Parts: parts})
	return err
}
