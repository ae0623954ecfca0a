package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/astrabox/astrabox/store"
)

// newBootstrapAdminCommand is `astrabox users bootstrap-admin`: the one user command
// that works on the database instead of the API, because a new deployment has no
// administrator whose token could call the API. Whoever can reach the database with
// the deployment's configuration may run it.
func newBootstrapAdminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bootstrap-admin EMAIL",
		Short: "Create an administrator (or reuse one) in the database and issue them a token; for a new deployment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strings.Contains(args[0], "@") {
				return &usageError{fmt.Errorf("bootstrap-admin needs an email address, not %q", args[0])}
			}
			name, _ := cmd.Flags().GetString("token-name")
			var expiresAt *time.Time
			if in, _ := cmd.Flags().GetDuration("expires-in"); in != 0 {
				if in < 0 {
					return &usageError{fmt.Errorf("--expires-in must be positive")}
				}
				t := time.Now().Add(in)
				expiresAt = &t
			}
			return withStore(cmd, func(ctx context.Context, st *store.Store) error {
				user, err := bootstrapAdmin(ctx, st, args[0])
				if err != nil {
					return err
				}
				tok, secret, err := st.CreateAPIToken(ctx, user.ID, name, expiresAt)
				if err != nil {
					return fmt.Errorf("issue token: %w", err)
				}
				out := map[string]any{"user_id": user.ID, "email": user.Email, "token_id": tok.ID, "secret": secret, "expires_at": tok.ExpiresAt}
				return output(cmd, out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "administrator %s (%s)\ntoken %s %q\nsecret (shown once): %s\n", user.Email, user.ID, tok.ID, name, secret)
					return err
				})
			})
		},
	}
	cmd.Flags().String("token-name", "bootstrap", "the token's name")
	cmd.Flags().Duration("expires-in", 0, "the token's lifetime, such as 24h (default: never expires)")
	return cmd
}

// bootstrapAdmin returns the administrator with email, creating them when no user has
// it. An existing member or a disabled user is refused: bootstrapping grants no role and
// lifts no decision an administrator made.
func bootstrapAdmin(ctx context.Context, st *store.Store, email string) (store.User, error) {
	u, err := st.GetUserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		u, err = st.CreateUser(ctx, store.NewUser{Email: email, Role: store.RoleAdmin})
		if err != nil {
			return store.User{}, fmt.Errorf("create administrator %s: %w", email, err)
		}
		return u, nil
	}
	if err != nil {
		return store.User{}, err
	}
	if !u.IsAdmin() || u.Disabled() {
		return store.User{}, fmt.Errorf("%s is a member or disabled, not an active administrator: use `astrabox users` with an administrator's token", email)
	}
	return u, nil
}
