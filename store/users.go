package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/store/pubsub"
)

const (
	// apiTokenMarker starts every plaintext token so leaked tokens are recognisable.
	apiTokenMarker = "abx_"
	// apiTokenPrefixLen is how much of the plaintext is stored in clear as its prefix.
	apiTokenPrefixLen = len(apiTokenMarker) + 8
)

// NewUser is what CreateUser needs.
type NewUser struct {
	Email       string
	DisplayName string
	// Role is RoleMember (default) or RoleAdmin.
	Role string
}

// CreateUser inserts a user; an email already in use (case-insensitive) is ErrDuplicate.
func (s *Store) CreateUser(ctx context.Context, in NewUser) (User, error) {
	u := User{ID: uuid.NewString(), Email: strings.TrimSpace(in.Email), DisplayName: in.DisplayName, Role: in.Role}
	if u.Role == "" {
		u.Role = RoleMember
	}
	if err := s.conn(ctx).Create(&u).Error; err != nil {
		return User{}, mapError("create user", err)
	}
	return u, nil
}

// GetUserByID returns one user.
func (s *Store) GetUserByID(ctx context.Context, id string) (User, error) {
	var u User
	err := s.conn(ctx).Where("id = ?", id).Take(&u).Error
	return u, mapError("get user by id", err)
}

// GetUserByEmail returns the user with this email, compared case-insensitively.
func (s *Store) GetUserByEmail(ctx context.Context, email string) (User, error) {
	var u User
	err := s.conn(ctx).Where("lower(email) = lower(?)", strings.TrimSpace(email)).Take(&u).Error
	return u, mapError("get user by email", err)
}

// HashAPIToken is the SHA-256 stored for a plaintext token. The plaintext carries 256
// random bits, so a fast unsalted hash is enough: there is nothing to guess.
func HashAPIToken(plaintext string) []byte {
	sum := sha256.Sum256([]byte(plaintext))
	return sum[:]
}

// CreateAPIToken mints a token for the user and returns its row and plaintext. The
// plaintext is shown once; only its hash and prefix are stored.
func (s *Store) CreateAPIToken(ctx context.Context, userID, name string, expiresAt *time.Time) (APIToken, string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return APIToken{}, "", fmt.Errorf("create api token: read random: %w", err)
	}
	plaintext := apiTokenMarker + base64.RawURLEncoding.EncodeToString(secret)
	t := APIToken{
		ID:        uuid.NewString(),
		UserID:    userID,
		Name:      name,
		Prefix:    plaintext[:apiTokenPrefixLen],
		TokenHash: HashAPIToken(plaintext),
		ExpiresAt: expiresAt,
	}
	if err := s.conn(ctx).Create(&t).Error; err != nil {
		return APIToken{}, "", mapError("create api token", err)
	}
	return t, plaintext, nil
}

// GetAPITokenByHash returns the token whose hash is hash, revoked or not.
func (s *Store) GetAPITokenByHash(ctx context.Context, hash []byte) (APIToken, error) {
	var t APIToken
	err := s.conn(ctx).Where("token_hash = ?", hash).Take(&t).Error
	return t, mapError("get api token by hash", err)
}

// tokenUserSQL reads a token and its user in one round trip. Its columns name every
// field of APIToken (t_) and User (u_); a column added to either model is added here.
const tokenUserSQL = `
SELECT t.id AS t_id, t.user_id AS t_user_id, t.name AS t_name, t.prefix AS t_prefix,
	t.token_hash AS t_token_hash, t.created_at AS t_created_at, t.last_used_at AS t_last_used_at,
	t.expires_at AS t_expires_at, t.revoked_at AS t_revoked_at,
	u.id AS u_id, u.email AS u_email, u.display_name AS u_display_name, u.role AS u_role,
	u.created_at AS u_created_at, u.updated_at AS u_updated_at, u.disabled_at AS u_disabled_at
FROM api_tokens t JOIN users u ON u.id = t.user_id
WHERE t.token_hash = ?`

// tokenUser is a row of tokenUserSQL.
type tokenUser struct {
	Token APIToken `gorm:"embedded;embeddedPrefix:t_"`
	User  User     `gorm:"embedded;embeddedPrefix:u_"`
}

// GetUserByAPIToken authenticates a plaintext bearer token: it returns the token's
// user, or ErrNotFound for an unknown, revoked or expired token or a disabled user.
// The token and its user are one statement; recording the token's use is the
// caller's (TouchAPIToken), at most once a minute, off this read.
func (s *Store) GetUserByAPIToken(ctx context.Context, plaintext string, now time.Time) (User, APIToken, error) {
	if !strings.HasPrefix(plaintext, apiTokenMarker) {
		return User{}, APIToken{}, fmt.Errorf("get user by api token: malformed token: %w", ErrNotFound)
	}
	var rows []tokenUser
	if err := scanRaw(s.conn(ctx), &rows, tokenUserSQL, HashAPIToken(plaintext)); err != nil {
		return User{}, APIToken{}, mapError("get user by api token", err)
	}
	if len(rows) == 0 {
		return User{}, APIToken{}, fmt.Errorf("get user by api token: unknown token: %w", ErrNotFound)
	}
	t, u := rows[0].Token, rows[0].User
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)) {
		return User{}, APIToken{}, fmt.Errorf("get user by api token: token revoked or expired: %w", ErrNotFound)
	}
	if u.Disabled() {
		return User{}, APIToken{}, fmt.Errorf("get user by api token: user disabled: %w", ErrNotFound)
	}
	return u, t, nil
}

// ListUsers returns every user, oldest first.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	var users []User
	err := s.conn(ctx).Order("created_at, id").Find(&users).Error
	return users, mapError("list users", err)
}

// SetUserDisabled disables the user at now, or enables them again. Disabling twice
// keeps the first time. Every token of a disabled user is refused from the next
// request on (GetUserByAPIToken reads the user each time), and open streams hear of it
// on pubsub.CredentialsRevokedChannel when the change commits.
func (s *Store) SetUserDisabled(ctx context.Context, id string, disabled bool, now time.Time) (User, error) {
	value := any(nil)
	if disabled {
		value = gormExpr("COALESCE(disabled_at, ?)", now)
	}
	var u User
	err := s.InTx(ctx, func(tx *Store) error {
		res := tx.conn(ctx).Model(&u).Clauses(clause.Returning{}).Where("id = ?", id).
			Updates(map[string]any{"disabled_at": value, "updated_at": gormExpr("now()")})
		if res.Error != nil {
			return mapError("set user disabled", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("set user %s disabled: %w", id, ErrNotFound)
		}
		if !disabled {
			return nil
		}
		return tx.notify(ctx, pubsub.CredentialsRevokedChannel, "")
	})
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// ListAPITokensByUser returns the user's tokens, revoked and expired ones included,
// newest first.
func (s *Store) ListAPITokensByUser(ctx context.Context, userID string) ([]APIToken, error) {
	var tokens []APIToken
	err := s.conn(ctx).Where("user_id = ?", userID).Order("created_at DESC, id").Find(&tokens).Error
	return tokens, mapError("list api tokens by user", err)
}

// RevokeUserAPIToken revokes one of the user's tokens and returns it, announcing it on
// pubsub.CredentialsRevokedChannel; a token of another user is ErrNotFound. Revoking
// twice keeps the first time.
func (s *Store) RevokeUserAPIToken(ctx context.Context, userID, tokenID string) (APIToken, error) {
	var t APIToken
	err := s.InTx(ctx, func(tx *Store) error {
		res := tx.conn(ctx).Model(&t).Clauses(clause.Returning{}).Where("id = ? AND user_id = ?", tokenID, userID).
			Update("revoked_at", gormExpr("COALESCE(revoked_at, now())"))
		if res.Error != nil {
			return mapError("revoke api token", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("revoke api token %s of user %s: %w", tokenID, userID, ErrNotFound)
		}
		return tx.notify(ctx, pubsub.CredentialsRevokedChannel, "")
	})
	if err != nil {
		return APIToken{}, err
	}
	return t, nil
}

// RevokeAPIToken marks a token revoked; revoking twice keeps the first time. Like
// RevokeUserAPIToken it announces the revocation on pubsub.CredentialsRevokedChannel.
func (s *Store) RevokeAPIToken(ctx context.Context, id string) error {
	return s.InTx(ctx, func(tx *Store) error {
		res := tx.conn(ctx).Model(&APIToken{}).Where("id = ?", id).
			Update("revoked_at", gormExpr("COALESCE(revoked_at, now())"))
		if res.Error != nil {
			return mapError("revoke api token", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("revoke api token %s: %w", id, ErrNotFound)
		}
		return tx.notify(ctx, pubsub.CredentialsRevokedChannel, "")
	})
}

// TouchAPIToken sets the token's last_used_at to now unless it was set less than every
// ago, so a busy token costs one write per interval (also across API replicas).
func (s *Store) TouchAPIToken(ctx context.Context, id string, now time.Time, every time.Duration) error {
	err := s.conn(ctx).Model(&APIToken{}).
		Where("id = ? AND (last_used_at IS NULL OR last_used_at <= ?)", id, now.Add(-every)).
		Update("last_used_at", now).Error
	return mapError("touch api token", err)
}
