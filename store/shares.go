package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/store/pubsub"
)

// shareTokenMarker starts every share link token, so a leaked one is recognisable and
// never mistaken for an API token (which starts with apiTokenMarker).
const shareTokenMarker = "abs_"

// SessionShare is a read-only link to a Session, stored as the SHA-256 of its token.
type SessionShare struct {
	ID            string     `gorm:"column:id;primaryKey"`
	SessionID     string     `gorm:"column:session_id"`
	TokenHash     []byte     `gorm:"column:token_hash"`
	AllowDownload bool       `gorm:"column:allow_download"`
	CreatedBy     *string    `gorm:"column:created_by"`
	CreatedAt     time.Time  `gorm:"column:created_at"`
	ExpiresAt     time.Time  `gorm:"column:expires_at"`
	RevokedAt     *time.Time `gorm:"column:revoked_at"`
}

// TableName is the session_shares table.
func (SessionShare) TableName() string { return "session_shares" }

// NewSessionShare is what CreateSessionShare needs.
type NewSessionShare struct {
	SessionID     string
	CreatedBy     string
	AllowDownload bool
	ExpiresAt     time.Time
}

// CreateSessionShare mints a share link token for the Session and returns its row and
// plaintext. The plaintext carries 256 random bits and is shown once; only its hash is
// stored.
func (s *Store) CreateSessionShare(ctx context.Context, in NewSessionShare) (SessionShare, string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return SessionShare{}, "", fmt.Errorf("create session share: read random: %w", err)
	}
	plaintext := shareTokenMarker + base64.RawURLEncoding.EncodeToString(secret)
	sh := SessionShare{
		ID:            uuid.NewString(),
		SessionID:     in.SessionID,
		TokenHash:     HashAPIToken(plaintext),
		AllowDownload: in.AllowDownload,
		CreatedBy:     &in.CreatedBy,
		ExpiresAt:     in.ExpiresAt,
	}
	if err := s.conn(ctx).Create(&sh).Error; err != nil {
		return SessionShare{}, "", mapError("create session share", err)
	}
	return sh, plaintext, nil
}

// ListSessionShares returns the Session's share links, revoked and expired ones
// included, newest first.
func (s *Store) ListSessionShares(ctx context.Context, sessionID string) ([]SessionShare, error) {
	var shares []SessionShare
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("created_at DESC, id").Find(&shares).Error
	return shares, mapError("list session shares", err)
}

// RevokeSessionShare revokes one of the Session's share links and returns it,
// announcing it on pubsub.CredentialsRevokedChannel; a link of another Session is
// ErrNotFound. Revoking twice keeps the first time.
func (s *Store) RevokeSessionShare(ctx context.Context, sessionID, shareID string) (SessionShare, error) {
	var sh SessionShare
	err := s.InTx(ctx, func(tx *Store) error {
		res := tx.conn(ctx).Model(&sh).Clauses(clause.Returning{}).Where("id = ? AND session_id = ?", shareID, sessionID).
			Update("revoked_at", gormExpr("COALESCE(revoked_at, now())"))
		if res.Error != nil {
			return mapError("revoke session share", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("revoke share %s of session %s: %w", shareID, sessionID, ErrNotFound)
		}
		return tx.notify(ctx, pubsub.CredentialsRevokedChannel, "")
	})
	if err != nil {
		return SessionShare{}, err
	}
	return sh, nil
}

// GetActiveSessionShare resolves a share link token: it returns the link, or
// ErrNotFound when the token is unknown, the link revoked or expired at now, its
// Session deleted, or the Session's owner disabled (a disabled user's links stop
// with their tokens).
func (s *Store) GetActiveSessionShare(ctx context.Context, plaintext string, now time.Time) (SessionShare, error) {
	if !strings.HasPrefix(plaintext, shareTokenMarker) {
		return SessionShare{}, fmt.Errorf("get session share: malformed token: %w", ErrNotFound)
	}
	var sh SessionShare
	err := s.conn(ctx).Table("session_shares AS sh").Select("sh.*").
		Joins("JOIN sessions AS s ON s.id = sh.session_id").
		Joins("JOIN users AS u ON u.id = s.user_id").
		Where("sh.token_hash = ? AND sh.revoked_at IS NULL AND sh.expires_at > ?", HashAPIToken(plaintext), now).
		Where("s.lifecycle <> ? AND u.disabled_at IS NULL", LifecycleDeleted).
		Take(&sh).Error
	return sh, mapError("get session share", err)
}
