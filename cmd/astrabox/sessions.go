package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/astrabox/astrabox/client"
)

func newSessionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Create Sessions, send messages, follow their stream, interrupt and answer (public API client)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addClientFlags(cmd)
	cmd.AddCommand(newSessionsCreate(), newSessionsGet(), newSessionsList(), newSessionsSend(), newSessionsStream(),
		newSessionsInterrupt(), newSessionsAnswer())
	return cmd
}

func newSessionsCreate() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create [AGENT_ID]",
		Short: "Create a Session from an Agent (default $AGENT_ID)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			agentID := os.Getenv("AGENT_ID")
			if len(args) == 1 {
				agentID = args[0]
			}
			if agentID == "" {
				return &usageError{fmt.Errorf("sessions create needs an AGENT_ID argument or $AGENT_ID")}
			}
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			key, _ := cmd.Flags().GetString("idempotency-key")
			created, err := c.CreateSession(cmd.Context(), agentID, key)
			if err != nil {
				return err
			}
			return output(cmd, created, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, created.SessionID)
				return err
			})
		},
	}
	cmd.Flags().String("idempotency-key", "", "the same key for the same Agent returns the same Session")
	return cmd
}

func newSessionsGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION_ID",
		Short: "Show a Session's current details",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			s, err := c.GetSession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, s, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "session_id\t%s\nstate\t%s\ntitle\t%s\nruntime_status\t%s\noutput_seq\t%d\n",
					s.SessionID, s.State, orDash(s.Title), orDash(s.RuntimeStatus), s.OutputSeq)
				return err
			})
		},
	}
}

func newSessionsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your Sessions, newest activity first (one page)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			var opts client.ListOptions
			opts.Limit, _ = cmd.Flags().GetInt("limit")
			opts.Cursor, _ = cmd.Flags().GetString("cursor")
			opts.Archived, _ = cmd.Flags().GetBool("archived")
			page, err := c.ListSessions(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return output(cmd, page, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SESSION_ID\tSTATE\tTITLE\tUPDATED")
				for _, s := range page.Sessions {
					updated := "-"
					if s.UpdatedAt != nil {
						updated = s.UpdatedAt.Format("2006-01-02T15:04:05Z")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.SessionID, s.State, orDash(s.Title), updated)
				}
				if page.NextCursor != nil {
					fmt.Fprintf(tw, "more: --cursor %s\n", *page.NextCursor)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().Int("limit", 20, "page size, 1 to 100")
	cmd.Flags().String("cursor", "", "continue from a page's next cursor")
	cmd.Flags().Bool("archived", false, "list archived Sessions")
	return cmd
}

func newSessionsSend() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "send SESSION_ID TEXT|-",
		Short: "Send a message (- reads it from standard input); prints the receipt",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			content := args[1]
			if content == "-" {
				raw, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read message from standard input: %w", err)
				}
				content = string(raw)
			}
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			in := client.Input{Content: content}
			if id, _ := cmd.Flags().GetString("client-message-id"); id != "" {
				in.ClientMessageID = &id
			}
			receipt, err := c.SendInput(cmd.Context(), args[0], in)
			if err != nil {
				return err
			}
			return output(cmd, receipt, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "input_id\t%s\nstate\t%s\nduplicate\t%t\noutput_seq\t%d\n", receipt.InputID, receipt.State, receipt.Duplicate, receipt.OutputSeq)
				return err
			})
		},
	}
	cmd.Flags().String("client-message-id", "", "idempotency key: the same id always names the same message")
	return cmd
}

func newSessionsStream() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream SESSION_ID",
		Short: "Follow a Session's stream until its response ends (--follow: keep following); resumes after drops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			after, _ := cmd.Flags().GetInt64("after-seq")
			if !cmd.Flags().Changed("after-seq") {
				// The document's rule: to wait for the next response, start from output_seq.
				s, err := c.GetSession(ctx, args[0])
				if err != nil {
					return err
				}
				after = s.OutputSeq
			}
			parts := c.Stream(ctx, args[0], after)
			if follow, _ := cmd.Flags().GetBool("follow"); follow {
				parts = c.Follow(ctx, args[0], after)
			}
			out := cmd.OutOrStdout()
			text := &textPrinter{w: out}
			for p, err := range parts {
				if err != nil {
					return err
				}
				if jsonOutput(cmd) {
					line, err := json.Marshal(struct {
						Seq  int64           `json:"seq"`
						Part json.RawMessage `json:"part"`
					}{p.Seq, p.Raw})
					if err != nil {
						return err
					}
					if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
						return err
					}
					continue
				}
				if err := text.part(p); err != nil {
					return err
				}
			}
			if !jsonOutput(cmd) {
				return text.end()
			}
			return nil
		},
	}
	cmd.Flags().Int64("after-seq", 0, "the position to follow from (default: the Session's output_seq, the next response)")
	cmd.Flags().Bool("follow", false, "keep following after a response ends, until interrupted")
	return cmd
}

// textPrinter prints a stream for people: the text as it arrives, and one line for
// each tool call, interaction, refusal and response end.
type textPrinter struct {
	w       io.Writer
	midLine bool
}

func (t *textPrinter) part(p client.Part) error {
	var fields struct {
		Delta     string          `json:"delta"`
		ToolName  string          `json:"toolName"`
		ErrorText string          `json:"errorText"`
		Data      json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(p.Raw, &fields)
	switch {
	case p.Type == "text-delta":
		t.midLine = !strings.HasSuffix(fields.Delta, "\n")
		_, err := io.WriteString(t.w, fields.Delta)
		return err
	case p.Type == "tool-input-available":
		return t.line("[tool " + fields.ToolName + "]")
	case p.Type == "error":
		return t.line("[error] " + fields.ErrorText)
	case p.Type == "data-interaction" || p.Type == "data-input-failed":
		return t.line("[" + strings.TrimPrefix(p.Type, "data-") + "] " + string(fields.Data))
	case p.Type == "finish":
		return t.line(fmt.Sprintf("[finish seq=%d]", p.Seq))
	}
	return nil
}

func (t *textPrinter) line(s string) error {
	prefix := ""
	if t.midLine {
		prefix = "\n"
	}
	t.midLine = false
	_, err := fmt.Fprintf(t.w, "%s%s\n", prefix, s)
	return err
}

func (t *textPrinter) end() error {
	if t.midLine {
		_, err := fmt.Fprintln(t.w)
		return err
	}
	return nil
}

func newSessionsInterrupt() *cobra.Command {
	return &cobra.Command{
		Use:   "interrupt SESSION_ID",
		Short: "Interrupt the response in progress (queued messages are never withdrawn)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.Interrupt(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return output(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, res.Status)
				return err
			})
		},
	}
}

func newSessionsAnswer() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "answer SESSION_ID INTERACTION_ID",
		Short: "Answer an approval or question (--decision, --reason, --values JSON)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a client.Answer
			a.Decision, _ = cmd.Flags().GetString("decision")
			a.Reason, _ = cmd.Flags().GetString("reason")
			if values, _ := cmd.Flags().GetString("values"); values != "" {
				if !json.Valid([]byte(values)) {
					return &usageError{fmt.Errorf("--values must be a JSON object")}
				}
				a.Values = json.RawMessage(values)
			}
			if a.Decision == "" && a.Values == nil {
				return &usageError{fmt.Errorf("sessions answer needs --decision or --values")}
			}
			c, err := newClient(cmd)
			if err != nil {
				return err
			}
			got, err := c.AnswerInteraction(cmd.Context(), args[0], args[1], a)
			if err != nil {
				return err
			}
			return output(cmd, got, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s\t%s\n", got.InteractionID, got.State)
				return err
			})
		},
	}
	cmd.Flags().String("decision", "", "approve or deny (approvals), as the interaction's presentation asks")
	cmd.Flags().String("reason", "", "why, shown to the Agent program")
	cmd.Flags().String("values", "", "answers to a question, as a JSON object")
	return cmd
}
