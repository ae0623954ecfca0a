package api

import (
	"context"
	"sync"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// tokenCache keeps the API tokens requests authenticated with, and their users, for a
// few seconds, so a client's stream openings (one per reply it follows) and inputs do
// not each read its token and user from PostgreSQL.
//
// A change that takes a right away (a token revoked, a user disabled) announces
// itself on pubsub.CredentialsRevokedChannel when it commits, and the process that
// made it empties its own cache at once. Every lookup first takes the announcements
// that have arrived and empties the cache on any, or when the listener may have
// missed some (its connection dropped). Nothing is cached before the cache listens
// or after its listener closed, and an entry lives at most ttl, which bounds a change
// made without an announcement (a row edited by hand).
type tokenCache struct {
	ttl    time.Duration
	output OutputSubscriber

	mu          sync.Mutex
	sub         *pubsub.Subscription
	subscribing bool
	closed      bool // the listener closed: nothing is cached any more
	entries     map[string]cachedToken
}

// cachedToken is an authenticated token, its user, and when they were read.
type cachedToken struct {
	user  store.User
	token store.APIToken
	read  time.Time
}

func newTokenCache(ttl time.Duration, output OutputSubscriber) *tokenCache {
	return &tokenCache{ttl: ttl, output: output, entries: map[string]cachedToken{}}
}

// get returns the user and token of plaintext, from the cache when an entry read
// less than ttl ago holds and the token has not expired by now, else from read
// (GetUserByAPIToken), whose success is cached when the cache listens.
func (tc *tokenCache) get(ctx context.Context, plaintext string, now time.Time,
	read func() (store.User, store.APIToken, error)) (store.User, store.APIToken, error) {
	if tc.ttl <= 0 || tc.output == nil {
		return read()
	}
	key := string(store.HashAPIToken(plaintext))
	listening := tc.takeAnnouncements(ctx)
	if listening {
		tc.mu.Lock()
		e, ok := tc.entries[key]
		tc.mu.Unlock()
		if ok && now.Sub(e.read) < tc.ttl && (e.token.ExpiresAt == nil || now.Before(*e.token.ExpiresAt)) {
			return e.user, e.token, nil
		}
	}
	u, t, err := read()
	if err == nil && listening {
		tc.mu.Lock()
		tc.entries[key] = cachedToken{user: u, token: t, read: now}
		tc.mu.Unlock()
	}
	return u, t, err
}

// touched records that the token's last use was written at now, so the cached copy
// does not ask for the write again.
func (tc *tokenCache) touched(plaintext string, now time.Time) {
	key := string(store.HashAPIToken(plaintext))
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if e, ok := tc.entries[key]; ok {
		e.token.LastUsedAt = &now
		tc.entries[key] = e
	}
}

// flush empties the cache: this process took a right away.
func (tc *tokenCache) flush() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	clear(tc.entries)
}

// takeAnnouncements subscribes on first use, then takes every announcement that
// arrived and empties the cache if there was any or the listener dropped. It reports
// whether the cache listens, so entries may be used and kept.
func (tc *tokenCache) takeAnnouncements(ctx context.Context) bool {
	tc.mu.Lock()
	if tc.closed || tc.subscribing {
		tc.mu.Unlock()
		return false
	}
	if tc.sub == nil {
		tc.subscribing = true
		tc.mu.Unlock()
		sub, err := tc.output.Subscribe(ctx, pubsub.CredentialsRevokedChannel)
		tc.mu.Lock()
		tc.subscribing = false
		if err != nil {
			tc.mu.Unlock()
			return false // the next lookup tries again
		}
		tc.sub = sub
	}
	defer tc.mu.Unlock()
	for {
		select {
		case _, ok := <-tc.sub.C():
			clear(tc.entries)
			if !ok {
				tc.closed = true
				return false
			}
		case <-tc.sub.Dropped():
			clear(tc.entries)
		default:
			return true
		}
	}
}
