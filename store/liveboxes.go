package store

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// liveBoxCondition selects a user's Sessions that hold a box or are about to
// get their first one: not archived or deleted, and either placed in a sandbox
// or still being created. Sessions whose idle box was released hold none.
const liveBoxCondition = "user_id = ? AND archived_at IS NULL AND lifecycle IN ? AND (sandbox_id IS NOT NULL OR lifecycle = ?)"

// CountLiveBoxesByUser counts the user's Sessions that hold or are starting a box.
func (s *Store) CountLiveBoxesByUser(ctx context.Context, userID string) (int64, error) {
	var n int64
	err := s.conn(ctx).Model(&Session{}).
		Where(liveBoxCondition, userID, []string{LifecycleCreating, LifecycleActive}, LifecycleCreating).Count(&n).Error
	return n, mapError("count live boxes", err)
}

// checkLiveBoxes refuses with ErrLiveBoxLimit when the user has limit live
// boxes. It runs in the create transaction under a lock on the user's row, so
// concurrent creates of one user are counted one after the other.
func (s *Store) checkLiveBoxes(ctx context.Context, userID string, limit int) error {
	var u User
	// FOR NO KEY UPDATE serializes the user's creations all the same, but does not wait
	// on the key share lock each creation's own idempotency key holds on the user row
	// (its foreign key): FOR UPDATE there made two concurrent creations deadlock.
	if err := s.conn(ctx).Clauses(clause.Locking{Strength: "NO KEY UPDATE"}).
		Where("id = ?", userID).Take(&u).Error; err != nil {
		return mapError("lock user", err)
	}
	n, err := s.CountLiveBoxesByUser(ctx, userID)
	if err != nil {
		return err
	}
	if n >= int64(limit) {
		return fmt.Errorf("%w: %d of %d", ErrLiveBoxLimit, n, limit)
	}
	return nil
}
