package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/astrabox/astrabox/client"
)

// The client commands (sessions, users, tokens) talk to a deployment's public API
// through package client, as any integration does. They read SERVICE_URL and
// ACCESS_TOKEN, the names var/dev.env and the product documents use; flags override.

// addClientFlags adds the connection and output flags every client command shares.
func addClientFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.String("service-url", "", "the deployment's URL (default $SERVICE_URL)")
	fs.String("access-token", "", "the API token (default $ACCESS_TOKEN; prefer the variable, flags show in process lists)")
	fs.Bool("json", false, "print the answer's data as JSON (streams: one JSON line per part)")
}

// newClient builds the client from the flags and environment.
func newClient(cmd *cobra.Command) (*client.Client, error) {
	serviceURL, _ := cmd.Flags().GetString("service-url")
	if serviceURL == "" {
		serviceURL = os.Getenv("SERVICE_URL")
	}
	token, _ := cmd.Flags().GetString("access-token")
	if token == "" {
		token = os.Getenv("ACCESS_TOKEN")
	}
	if serviceURL == "" || token == "" {
		return nil, &usageError{fmt.Errorf("%s needs SERVICE_URL and ACCESS_TOKEN (source var/dev.env, or pass --service-url and --access-token)", cmd.CommandPath())}
	}
	c, err := client.New(serviceURL, token)
	if err != nil {
		return nil, &usageError{err}
	}
	return c, nil
}

// jsonOutput reports whether --json was given.
func jsonOutput(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// output writes v as JSON under --json, otherwise runs text.
func output(cmd *cobra.Command, v any, text func(io.Writer) error) error {
	if jsonOutput(cmd) {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}

// orDash shows an absent value as "-".
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}
