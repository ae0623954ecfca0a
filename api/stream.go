package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// streamBatch is how many parts one read of the output log takes.
const streamBatch = 500

// streamSession follows the Session's output log from after_seq as an AI SDK UI
// Message Stream over SSE: each part as `data: <json>\n\n`, followed by a
// data-resume-cursor part carrying its seq. The stream ends after the part that
// finishes a response (or reports a refused input outside any response), then sends
// `data: [DONE]`.
//
// Postgres is the truth and NOTIFY a hint: the follower subscribes before it reads the
// backlog, so nothing committed in between is missed. A notification that carries its
// parts' frames (what a commit of parts wrote, pubsub.OutputNotice) and continues the
// stream at its cursor is sent as it is; any other (no frames, a gap, a dropped listener
// signal) has the follower re-read the log from its cursor. Idle streams get a
// keep-alive comment. Last-Event-ID is not used: the cursor is after_seq.
func (s *Server) streamSession(c *gin.Context) {
	if err := knownQuery(c, "after_seq"); err != nil {
		s.fail(c, err)
		return
	}
	after, err := queryInt(c, "after_seq", 0, 0, 1<<62)
	if err != nil {
		s.fail(c, err)
		return
	}
	if s.output == nil {
		s.fail(c, Unavailable("streaming is not configured", nil))
		return
	}
	ctx := c.Request.Context()
	open, err := s.openStream(c, after)
	defer open.end()
	if err != nil {
		s.fail(c, err)
		return
	}
	sess, sub, pos := open.session, open.sub, open.pos
	if after > sess.OutputSeq {
		s.fail(c, InvalidRequest("after_seq", "%d is beyond the Session's output position %d", after, sess.OutputSeq))
		return
	}
	credential, stillValid := s.streamCredential(c)
	release, err := s.streams.acquire(credential)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer release()
	s.metrics.SSEFollowers.Inc()
	defer s.metrics.SSEFollowers.Dec()
	// The request is read: lift the server's read timeout, which would otherwise end the
	// stream (net/http cancels a request whose connection read fails).
	if err := http.NewResponseController(c.Writer).SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.fail(c, fmt.Errorf("lift read deadline for stream: %w", err))
		return
	}
	// A revoked token or link, or a disabled user, is announced: the stream re-checks its
	// credential at once instead of at its next periodic re-check.
	revoked, err := s.output.Subscribe(ctx, pubsub.CredentialsRevokedChannel)
	if err != nil {
		s.fail(c, fmt.Errorf("subscribe to credential revocations: %w", err))
		return
	}
	defer revoked.Close()

	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set("x-vercel-ai-ui-message-stream", "v1")
	c.Status(http.StatusOK)
	f := &streamFollower{s: s, sub: sub, revoked: revoked.C(), sessionID: sess.ID, cursor: after, inResponse: pos.InResponse,
		w: bufio.NewWriter(c.Writer), flush: c.Writer.Flush, tokenValid: stillValid}
	f.needRead = pos.OutputSeq > after // the backlog, if the log holds any
	err = f.run(ctx)
	if errors.Is(err, errTokenInvalid) {
		RequestLogger(c, s.log).Info("stream ended: its token or share link was revoked or expired", zap.String("session_id", sess.ID), zap.String("credential", credential))
		return
	}
	if err != nil && ctx.Err() == nil {
		RequestLogger(c, s.log).Warn("stream ended early", zap.String("session_id", sess.ID), zap.Int64("cursor", f.cursor), zap.Error(err))
	}
}

// openedStream is a stream's Session, its subscription to the Session's output and
// the Session's output position at the stream's cursor, read after subscribing.
type openedStream struct {
	session store.Session
	sub     *pubsub.Subscription
	pos     store.StreamPosition
	allowed bool
}

// end ends the subscription: a refused stream's channel is not left listened to.
func (o *openedStream) end() {
	switch {
	case o.sub == nil:
	case o.allowed:
		o.sub.Close()
	default:
		o.sub.Abandon()
	}
}

// openStream subscribes to the Session's output, then reads the Session and its
// position at the cursor after in one statement, and checks the caller may read it;
// a part committed after the read is announced to the subscription. A share link's
// Session, read by its link, is subscribed to and its position read after.
func (s *Server) openStream(c *gin.Context, after int64) (*openedStream, error) {
	ctx := c.Request.Context()
	o := &openedStream{}
	sess, err := s.loadSessionWith(c, readAccess, func(ctx context.Context, id string) (store.Session, error) {
		sub, err := s.output.Subscribe(ctx, pubsub.SessionOutputChannel(id))
		if err != nil {
			return store.Session{}, fmt.Errorf("subscribe to session output: %w", err)
		}
		o.sub = sub
		sess, pos, err := s.store.GetSessionAtStreamPosition(ctx, id, after)
		o.pos = pos
		return sess, err
	})
	if err != nil {
		return o, err
	}
	o.session, o.allowed = sess, true
	if o.sub != nil {
		return o, nil
	}
	if o.sub, err = s.output.Subscribe(ctx, pubsub.SessionOutputChannel(sess.ID)); err != nil {
		return o, fmt.Errorf("subscribe to session output: %w", err)
	}
	if o.pos, err = s.store.StreamPositionAt(ctx, sess.ID, after); err != nil {
		return o, err
	}
	return o, nil
}

// streamFollower is one SSE follower of one Session.
type streamFollower struct {
	s          *Server
	sub        *pubsub.Subscription
	revoked    <-chan pubsub.Notification
	sessionID  string
	cursor     int64
	inResponse bool
	w          *bufio.Writer
	flush      func()
	// tokenValid re-checks the stream's token, so revoking it ends the stream.
	tokenValid func() (bool, error)
	recheck    <-chan time.Time
	// wokeAt is when the follower last learned the log may have grown (subscribed,
	// notified, or its listener reconnected): a read it takes part in starts after it.
	wokeAt time.Time
	// noticed are the notifications since the follower last caught up, in order;
	// needRead says one of them could not be used (or the listener dropped some), so
	// the log must be read.
	noticed  []pubsub.OutputNotice
	needRead bool
}

var (
	// errStreamDone ends a stream after its finishing part.
	errStreamDone = errors.New("stream done")
	// errTokenInvalid ends a stream whose token was revoked or expired.
	errTokenInvalid = errors.New("token revoked or expired")
)

func (f *streamFollower) run(ctx context.Context) error {
	keepAlive := time.NewTimer(f.s.keepAlive)
	defer keepAlive.Stop()
	recheck := time.NewTicker(f.s.tokenRecheck)
	defer recheck.Stop()
	f.recheck = recheck.C
	// Headers go out at once, so a client sees the stream open before any part.
	f.flush()
	f.wokeAt = time.Now()
	for {
		err := f.catchUp(ctx)
		if errors.Is(err, errStreamDone) {
			return f.send("[DONE]")
		}
		if err != nil {
			return err
		}
		more, err := f.waitForHint(ctx, keepAlive)
		if !more || err != nil {
			return err
		}
	}
}

// waitForHint waits for a notification or a dropped-listener signal, after which the
// log must be re-read, sending keep-alive comments while idle. It returns false when
// the client went away.
func (f *streamFollower) waitForHint(ctx context.Context, keepAlive *time.Timer) (bool, error) {
	keepAlive.Reset(f.s.keepAlive)
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case n, ok := <-f.sub.C():
			if !ok {
				// The listener closed: end the stream so the client resumes elsewhere.
				return false, fmt.Errorf("output listener closed")
			}
			f.take(n)
			f.coalesceHints()
			f.wokeAt = time.Now()
			return true, nil
		case <-f.sub.Dropped():
			f.needRead = true
			f.wokeAt = time.Now()
			return true, nil
		case <-f.recheck:
			if err := f.recheckCredential(); err != nil {
				return false, err
			}
		case _, ok := <-f.revoked:
			if !ok {
				return false, fmt.Errorf("credential listener closed")
			}
			if err := f.recheckCredential(); err != nil {
				return false, err
			}
		case <-keepAlive.C:
			if _, err := f.w.WriteString(": keep-alive\n\n"); err != nil {
				return false, err
			}
			if err := f.w.Flush(); err != nil {
				return false, err
			}
			f.flush()
			keepAlive.Reset(f.s.keepAlive)
		}
	}
}

// recheckCredential returns errTokenInvalid once the stream's token or share link no
// longer holds.
func (f *streamFollower) recheckCredential() error {
	valid, err := f.tokenValid()
	if err != nil {
		return fmt.Errorf("re-check stream credential: %w", err)
	}
	if !valid {
		return errTokenInvalid
	}
	return nil
}

// coalesceHints takes the notifications already queued, so one catch-up covers them.
func (f *streamFollower) coalesceHints() {
	for {
		select {
		case n, ok := <-f.sub.C():
			if !ok {
				return
			}
			f.take(n)
		default:
			return
		}
	}
}

// take keeps a notification for the next catch-up.
func (f *streamFollower) take(n pubsub.Notification) {
	notice, err := n.OutputNotice()
	if err != nil {
		f.needRead = true
		return
	}
	f.noticed = append(f.noticed, notice)
}

// catchUp sends what the follower learned of since it last caught up: the parts the
// notifications carried when they continue the stream from its cursor, else what a
// read of the log from the cursor finds.
func (f *streamFollower) catchUp(ctx context.Context) error {
	notices := f.noticed
	f.noticed = nil
	if !f.needRead {
		if len(notices) == 0 {
			return nil // nothing new: a stream opened at the head of the log
		}
		complete, err := f.sendNoticed(notices)
		if err != nil || complete {
			f.s.metrics.StreamCatchUps.WithLabelValues("notice").Inc()
			return err
		}
	}
	f.needRead = false
	f.s.metrics.StreamCatchUps.WithLabelValues("log").Inc()
	return f.drain(ctx)
}

// sendNoticed sends the parts notices carried after the cursor, in order. It reports
// false when they leave a gap (a notification without frames past the cursor, or one
// that starts after it: a notification the listener did not deliver), having sent
// what came before the gap.
func (f *streamFollower) sendNoticed(notices []pubsub.OutputNotice) (bool, error) {
	sent := false
	defer func() {
		if sent {
			_ = f.w.Flush()
			f.flush()
		}
	}()
	for _, n := range notices {
		if n.Seq <= f.cursor {
			continue // sent already, from an earlier notice or read
		}
		if len(n.Frames) == 0 || n.FirstSeq() > f.cursor+1 {
			return false, nil
		}
		read := f.s.noticedParts(f.sessionID, n)
		for _, p := range read.parts {
			if p.seq <= f.cursor {
				continue
			}
			done, err := f.sendPart(p)
			if err != nil {
				return false, err
			}
			sent = true
			if done {
				return true, errStreamDone
			}
		}
		if read.err != nil {
			return false, nil // the read from the cursor reports it
		}
	}
	return true, nil
}

// drain sends every committed part after the cursor; it returns errStreamDone after
// the part that ends the stream.
func (f *streamFollower) drain(ctx context.Context) error {
	for {
		read, err := f.s.partsAfter(ctx, f.sessionID, f.cursor, f.wokeAt)
		if err != nil {
			return err
		}
		for _, p := range read.parts {
			done, err := f.sendPart(p)
			if err != nil {
				return err
			}
			if done {
				return errStreamDone
			}
		}
		if len(read.parts) > 0 {
			if err := f.w.Flush(); err != nil {
				return err
			}
			f.flush()
		}
		if read.err != nil {
			return read.err
		}
		if len(read.parts) < streamBatch {
			return nil
		}
	}
}

// sendPart writes one part and its resume cursor and reports whether the stream ends
// after it.
func (f *streamFollower) sendPart(p streamedPart) (bool, error) {
	if _, err := f.w.Write(p.sse); err != nil {
		return false, err
	}
	f.cursor = p.seq
	switch {
	case p.finishes:
		return true, nil
	case p.typ == "start":
		f.inResponse = true
	case p.typ == "data-input-failed" && !f.inResponse:
		// A refused input starts no response: its report is all the client waits for.
		return true, nil
	}
	return false, nil
}

func (f *streamFollower) send(data string) error {
	if _, err := f.w.WriteString("data: " + data + "\n\n"); err != nil {
		return err
	}
	if data == "[DONE]" {
		if err := f.w.Flush(); err != nil {
			return err
		}
		f.flush()
	}
	return nil
}
