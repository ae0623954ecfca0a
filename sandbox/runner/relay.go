package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// execute runs a short command to completion in its own process group, killed
// with the group when its timeout passes.
func execute(ctx context.Context, req sandbox.ExecRequest, env []string, acct account) (sandbox.ExecResult, error) {
	if len(req.Argv) == 0 {
		return sandbox.ExecResult{}, fmt.Errorf("%w: exec without a program", sandbox.ErrInvalidSpec)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr := &capped{max: maxExecOutput}, &capped{max: maxExecOutput}
	var cmd *exec.Cmd
	err := acct.do(func() error {
		cmd = inEnvPath(exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...), req.Argv[0], env)
		cmd.Dir, cmd.Env = req.Dir, env
		cmd.Stdin = bytes.NewReader(req.Stdin)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.SysProcAttr = acct.sysProcAttr()
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		return cmd.Start()
	})
	if err == nil {
		err = cmd.Wait()
	}
	res := sandbox.ExecResult{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
		Truncated: stdout.dropped || stderr.dropped}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	case cmd.ProcessState == nil:
		return res, fmt.Errorf("exec %q: %w", req.Argv[0], err)
	}
	res.TimedOut = ctx.Err() != nil
	return res, nil
}

// maxExecOutput bounds what Exec keeps of each stream; long-running output
// belongs in a process session, whose output is journaled instead of held.
const maxExecOutput = 16 << 20

// capped keeps the first max bytes written and counts the rest as dropped.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room < len(p) {
		c.dropped = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

// handlePort upgrades the request to a raw TCP relay to 127.0.0.1:port inside
// the box: the platform reaches the box's published ports through the runner's
// socket, with no host port and no network namespace juggling.
func handlePort(w http.ResponseWriter, req *http.Request) {
	port, err := strconv.Atoi(req.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, fmt.Errorf("%w: port %q", sandbox.ErrInvalidSpec, req.PathValue("port")))
		return
	}
	var d net.Dialer
	target, err := d.DialContext(req.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		writeError(w, fmt.Errorf("%w: dial port %d: %v", sandbox.ErrNotFound, port, err))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		target.Close()
		writeError(w, errors.New("connection cannot be upgraded"))
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		target.Close()
		return
	}
	_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	if n := buf.Reader.Buffered(); n > 0 {
		early, _ := buf.Reader.Peek(n)
		if _, err := target.Write(early); err != nil {
			conn.Close()
			target.Close()
			return
		}
	}
	pipe(conn, target)
}

// serveForward accepts loopback connections and relays each to the host's unix
// socket. The socket is dialled per connection, so a restarted host side is
// reached by the next connection.
func serveForward(ctx context.Context, ln net.Listener, socket string, logger *log.Logger) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				logger.Printf("forward %s: accept: %v", ln.Addr(), err)
			}
			return
		}
		go func() {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			up, err := d.DialContext(dctx, "unix", socket)
			cancel()
			if err != nil {
				logger.Printf("forward %s: dial %s: %v", ln.Addr(), socket, err)
				conn.Close()
				return
			}
			pipe(conn, up)
		}()
	}
}

// pipe copies both ways, half-closing each direction when its source ends.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
