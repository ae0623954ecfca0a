package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/astrabox/astrabox/client"
)

func newUsersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Create, list, disable and enable users (administrators; public API client)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addClientFlags(cmd)
	create := &cobra.Command{
		Use:   "create EMAIL",
		Short: "Create a user (--role member|admin, --display-name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			in := client.NewUser{Email: args[0]}
			in.DisplayName, _ = cmd.Flags().GetString("display-name")
			in.Role, _ = cmd.Flags().GetString("role")
			u, err := c.CreateUser(cmd.Context(), in)
			if err != nil {
				return err
			}
			return output(cmd, u, func(w io.Writer) error { return printUsers(w, []client.User{u}) })
		},
	}
	create.Flags().String("display-name", "", "the name people see")
	create.Flags().String("role", "member", "member or admin")
	list := &cobra.Command{
		Use:   "list",
		Short: "List users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			users, err := c.ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			return output(cmd, users, func(w io.Writer) error { return printUsers(w, users) })
		},
	}
	me := &cobra.Command{
		Use:   "me",
		Short: "Show the user and token this ACCESS_TOKEN is",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			m, err := c.Me(cmd.Context())
			if err != nil {
				return err
			}
			return output(cmd, m, func(w io.Writer) error {
				if err := printUsers(w, []client.User{m.User}); err != nil {
					return err
				}
				return printTokens(w, []client.Token{m.Token})
			})
		},
	}
	cmd.AddCommand(create, list, me, newBootstrapAdminCommand(), userAction("disable", "Disable a user: their tokens stop working at once", (*client.Client).DisableUser),
		userAction("enable", "Enable a disabled user again", (*client.Client).EnableUser))
	return cmd
}

// userAction is a command that changes one user by id.
func userAction(name, short string, act func(*client.Client, context.Context, string) (client.User, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " USER_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			u, err := act(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, u, func(w io.Writer) error { return printUsers(w, []client.User{u}) })
		},
	}
}

func printUsers(w io.Writer, users []client.User) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER_ID\tEMAIL\tROLE\tDISABLED")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\n", u.UserID, u.Email, u.Role, u.Disabled)
	}
	return tw.Flush()
}

func newTokensCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Issue, list and revoke users' API tokens (administrators; public API client)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addClientFlags(cmd)
	create := &cobra.Command{
		Use:   "create USER_ID",
		Short: "Issue a token (--name, --expires-in); its secret is printed this once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := cmd.Flags().GetString("name")
			if name == "" {
				return &usageError{fmt.Errorf("tokens create needs --name")}
			}
			var expiresAt *time.Time
			if in, _ := cmd.Flags().GetDuration("expires-in"); in != 0 {
				if in < 0 {
					return &usageError{fmt.Errorf("--expires-in must be positive")}
				}
				t := time.Now().Add(in)
				expiresAt = &t
			}
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			tok, err := c.IssueToken(cmd.Context(), args[0], name, expiresAt)
			if err != nil {
				return err
			}
			return output(cmd, tok, func(w io.Writer) error {
				if err := printTokens(w, []client.Token{tok.Token}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, "secret (shown once): %s\n", tok.Secret)
				return err
			})
		},
	}
	create.Flags().String("name", "", "what the token is for (required)")
	create.Flags().Duration("expires-in", 0, "lifetime, such as 720h (default: never expires)")
	list := &cobra.Command{
		Use:   "list USER_ID",
		Short: "List a user's tokens, without secrets",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			tokens, err := c.ListTokens(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, tokens, func(w io.Writer) error { return printTokens(w, tokens) })
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke USER_ID TOKEN_ID",
		Short: "Revoke a token: it stops working at once",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			tok, err := c.RevokeToken(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return output(cmd, tok, func(w io.Writer) error { return printTokens(w, []client.Token{tok}) })
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func printTokens(w io.Writer, tokens []client.Token) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOKEN_ID\tNAME\tPREFIX\tSTATE\tEXPIRES")
	for _, t := range tokens {
		expires := "never"
		if t.ExpiresAt != nil {
			expires = t.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.TokenID, t.Name, t.Prefix, t.State, expires)
	}
	return tw.Flush()
}
