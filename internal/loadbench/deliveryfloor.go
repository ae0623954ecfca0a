package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// deliveryChannel is the delivery floor's notification channel.
const deliveryChannel = "bench_delivery_floor"

// deliveryFloor is what this machine takes to carry a committed part to SSE
// followers at all: sessions writers each commit parts rows (a part-sized frame and a
// NOTIFY carrying it, one statement a part) gap apart, and a bare net/http server
// with one LISTEN connection writes each notification's frame to the open streams
// of the Session's followers. A sample is a part's commit (when its COMMIT returned,
// which is after the commit itself, so the floor errs low) to its arrival on one
// follower, as commit-to-SSE times the platform's parts.
func deliveryFloor(ctx context.Context, dsn string, sessions, followers, parts int, gap time.Duration) (samples, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("delivery floor: %w", err)
	}
	defer pool.Close()
	const table = "bench_delivery_floor"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (session_id int NOT NULL, seq bigint NOT NULL, frame jsonb NOT NULL, PRIMARY KEY (session_id, seq))`); err != nil {
		return nil, fmt.Errorf("delivery floor table: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE `+table) //nolint:errcheck // the cluster is thrown away with the stack

	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	hub, err := listenForDeliveries(listenCtx, dsn, sessions*followers, parts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delivery floor listen: %w", err)
	}
	srv := &http.Server{Handler: hub, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()

	client := newAPIClient("http://"+ln.Addr().String(), "none").http
	arrivals := make([][]map[int64]time.Time, sessions)
	streams, streamsCtx := errgroup.WithContext(ctx)
	for s := range sessions {
		arrivals[s] = make([]map[int64]time.Time, followers)
		for f := range followers {
			arrivals[s][f] = map[int64]time.Time{}
			streams.Go(func() error { return readDeliveries(streamsCtx, client, ln.Addr().String(), s, parts, arrivals[s][f]) })
		}
	}
	select {
	case <-hub.allSubscribed:
	case <-streamsCtx.Done():
		return nil, fmt.Errorf("delivery floor: streams: %w", streams.Wait())
	}

	committed := make([][]time.Time, sessions)
	writers, wctx := errgroup.WithContext(ctx)
	for s := range sessions {
		committed[s] = make([]time.Time, parts+1)
		writers.Go(func() error {
			pace := time.NewTicker(gap)
			defer pace.Stop()
			for seq := int64(1); seq <= int64(parts); seq++ {
				// One statement, its own transaction: the insert and its notification.
				_, err := pool.Exec(wctx, `WITH part AS (INSERT INTO `+table+` (session_id, seq, frame) VALUES ($1, $2, $3) RETURNING seq)
					SELECT pg_notify($4, $5) FROM part`, s, seq, partFrame, deliveryChannel, fmt.Sprintf("%d %d %s", s, seq, partFrame))
				if err != nil {
					return fmt.Errorf("delivery floor commit: %w", err)
				}
				committed[s][seq] = time.Now()
				select {
				case <-wctx.Done():
					return wctx.Err()
				case <-pace.C:
				}
			}
			return nil
		})
	}
	if err := errors.Join(writers.Wait(), streams.Wait()); err != nil {
		return nil, err
	}
	var out samples
	for s := range sessions {
		for _, got := range arrivals[s] {
			for seq, at := range got {
				out = append(out, at.Sub(committed[s][seq]))
			}
		}
	}
	return out, nil
}

// deliveryHub is the delivery floor's SSE server: one LISTEN connection's
// notifications fanned out to the followers of each Session.
type deliveryHub struct {
	mu        sync.Mutex
	followers map[int][]chan []byte
	// parts is how many parts each Session's writer commits: a follower's queue holds
	// them all, so the fan-out never waits on a follower or drops a part.
	parts         int
	want          int
	allSubscribed chan struct{}
}

// listenForDeliveries listens on deliveryChannel and serves want followers of parts
// parts each.
func listenForDeliveries(ctx context.Context, dsn string, want, parts int) (*deliveryHub, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("delivery floor listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+deliveryChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // failing already
		return nil, fmt.Errorf("delivery floor listen: %w", err)
	}
	h := &deliveryHub{followers: map[int][]chan []byte{}, parts: parts, want: want, allSubscribed: make(chan struct{})}
	go func() {
		defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the floor is over
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			session, rest, _ := bytes.Cut([]byte(n.Payload), []byte(" "))
			s, err := strconv.Atoi(string(session))
			if err != nil {
				continue
			}
			h.mu.Lock()
			for _, f := range h.followers[s] {
				f <- rest // never full: it holds every part of the Session
			}
			h.mu.Unlock()
		}
	}()
	return h, nil
}

// ServeHTTP streams one Session's notified parts as SSE events of "seq frame".
func (h *deliveryHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, err := strconv.Atoi(r.URL.Query().Get("session"))
	if err != nil {
		http.Error(w, "session", http.StatusBadRequest)
		return
	}
	parts := make(chan []byte, max(h.parts, 1))
	h.mu.Lock()
	h.followers[s] = append(h.followers[s], parts)
	h.want--
	if h.want == 0 {
		close(h.allSubscribed)
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case p := <-parts:
			if _, err := fmt.Fprintf(w, "data: %s\n\n", p); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// readDeliveries follows one Session's stream until it has parts parts, noting when
// each seq arrived.
func readDeliveries(ctx context.Context, client *http.Client, addr string, session, parts int, arrived map[int64]time.Time) error {
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(readCtx, http.MethodGet, fmt.Sprintf("http://%s/?session=%d", addr, session), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("delivery floor stream: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for len(arrived) < parts && sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		seqText, _, _ := bytes.Cut(line, []byte(" "))
		seq, err := strconv.ParseInt(string(seqText), 10, 64)
		if err != nil {
			return fmt.Errorf("delivery floor event %q: %w", line, err)
		}
		arrived[seq] = time.Now()
	}
	if len(arrived) < parts {
		return fmt.Errorf("delivery floor stream of session %d ended after %d of %d parts: %v", session, len(arrived), parts, sc.Err())
	}
	return nil
}
