package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
)

// terminalID is the one web terminal of a Session, shared by all its viewers.
const terminalID = "web-terminal"

// terminalMessage is every WebSocket message of the terminal route, both ways.
// From the client: "input" (data: keystrokes as text) and "resize" (cols, rows).
// From the server: "ready" (offset: the output so far; first_offset: where the
// scrollback starts), "output" (data: bytes, base64 in JSON; offset: the
// offset just after them, to reconnect with after=offset), "exit" (code) when
// the shell ends, and "error" (message) for a refused client message.
type terminalMessage struct {
	Type        string `json:"type"`
	Data        []byte `json:"data,omitempty"`
	Text        string `json:"text,omitempty"`
	Offset      int64  `json:"offset,omitempty"`
	FirstOffset int64  `json:"first_offset,omitempty"`
	Cols        int    `json:"cols,omitempty"`
	Rows        int    `json:"rows,omitempty"`
	Code        *int   `json:"code,omitempty"`
	Message     string `json:"message,omitempty"`
}

// openTerminal upgrades to a WebSocket attached to the Session's terminal,
// starting its shell when none runs. Every viewer sees the same shell; after
// replays output from that byte offset (what a viewer missed while away).
func (s *Server) openTerminal(c *gin.Context) {
	if err := knownQuery(c, "after", "cols", "rows"); err != nil {
		s.fail(c, err)
		return
	}
	after, err := queryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		s.fail(c, err)
		return
	}
	cols, err := queryInt(c, "cols", 80, 1, sandbox.MaxTerminalSide)
	if err != nil {
		s.fail(c, err)
		return
	}
	rows, err := queryInt(c, "rows", 24, 1, sandbox.MaxTerminalSide)
	if err != nil {
		s.fail(c, err)
		return
	}
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	h, err := s.sessionBox(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer h.Close()
	ctx := c.Request.Context()
	st, err := h.StartTerminal(ctx, sandbox.TerminalSpec{ID: terminalID, Cols: int(cols), Rows: int(rows)})
	if err != nil {
		s.fail(c, workspaceError("", "", err))
		return
	}
	// The connection outlives http.read_timeout: lift it before the upgrade.
	if err := http.NewResponseController(c.Writer).SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.fail(c, err)
		return
	}
	conn, err := websocket.Accept(c.Writer, c.Request, &websocket.AcceptOptions{Subprotocols: []string{terminalSubprotocol}})
	if err != nil {
		RequestLogger(c, s.log).Info("terminal upgrade refused", zap.Error(err))
		return // Accept answered the client
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := wsjson.Write(ctx, conn, terminalMessage{Type: "ready", Offset: st.Offset, FirstOffset: st.FirstOffset}); err != nil {
		return
	}
	go func() {
		defer cancel()
		s.pumpTerminal(ctx, c, conn, h, after)
	}()
	for {
		var msg terminalMessage
		if err := wsjson.Read(ctx, conn, &msg); err != nil {
			return // the viewer left; the shell goes on for the others
		}
		var err error
		switch msg.Type {
		case "input":
			err = h.WriteTerminal(ctx, terminalID, []byte(msg.Text))
		case "resize":
			err = h.ResizeTerminal(ctx, terminalID, msg.Cols, msg.Rows)
		default:
			err = fmt.Errorf("%w %q (input, resize)", errUnknownTerminalMessage, msg.Type)
		}
		if err != nil {
			if werr := wsjson.Write(ctx, conn, terminalMessage{Type: "error", Message: terminalErrorText(err)}); werr != nil {
				return
			}
		}
	}
}

// errUnknownTerminalMessage refuses a message type the terminal does not know.
var errUnknownTerminalMessage = errors.New("unknown message type")

// terminalErrorText says what went wrong without internal detail.
func terminalErrorText(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return "invalid message: " + err.Error()
	case errors.Is(err, sandbox.ErrProcessExited):
		return "the shell has exited; reconnect to start a new one"
	case errors.Is(err, sandbox.ErrBoxLost):
		return "the Session's sandbox was lost"
	case errors.Is(err, errUnknownTerminalMessage):
		return err.Error()
	}
	return "the terminal did not take the message"
}

// pumpTerminal sends the terminal's output to one viewer until it ends.
func (s *Server) pumpTerminal(ctx context.Context, c *gin.Context, conn *websocket.Conn, h sandbox.Handle, after int64) {
	out, err := h.ReadTerminal(ctx, terminalID, after)
	if err != nil {
		RequestLogger(c, s.log).Warn("read terminal", zap.Error(err))
		conn.Close(websocket.StatusInternalError, "the terminal's output cannot be read")
		return
	}
	defer out.Close()
	for {
		chunk, err := out.Next()
		if errors.Is(err, io.EOF) {
			code := 0
			if st, serr := h.Terminal(ctx, terminalID); serr == nil && st.Exit != nil {
				code = st.Exit.Code
			}
			_ = wsjson.Write(ctx, conn, terminalMessage{Type: "exit", Code: &code})
			conn.Close(websocket.StatusNormalClosure, "the shell exited")
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				RequestLogger(c, s.log).Warn("terminal output", zap.Error(err))
				conn.Close(websocket.StatusInternalError, "the terminal's output was cut; reconnect with after")
			}
			return
		}
		if err := wsjson.Write(ctx, conn, terminalMessage{Type: "output", Data: chunk.Data, Offset: chunk.Offset}); err != nil {
			return
		}
	}
}

// terminalInterrupt is the answer of the terminal's interrupt.
type terminalInterrupt struct {
	SessionID   string `json:"session_id"`
	Interrupted bool   `json:"interrupted"`
}

// interruptTerminal sends SIGINT to the terminal's foreground job. It touches
// neither the Agent program nor the response in progress, and the
// conversation's interrupt does not touch the terminal.
func (s *Server) interruptTerminal(c *gin.Context) {
	sess, err := s.loadSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := decodeBody(c, s.maxBodyBytes, &struct{}{}, true); err != nil {
		s.fail(c, err)
		return
	}
	h, err := s.sessionBox(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer h.Close()
	ok, err := h.InterruptTerminal(c.Request.Context(), terminalID)
	if errors.Is(err, sandbox.ErrNoProcess) || errors.Is(err, sandbox.ErrProcessExited) {
		ok, err = false, nil // no terminal, or its shell ended: nothing runs
	}
	if err != nil {
		s.fail(c, workspaceError("", "", err))
		return
	}
	writeOK(c, terminalInterrupt{SessionID: sess.ID, Interrupted: ok})
}
