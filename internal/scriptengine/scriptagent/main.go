// Command scriptagent is a tiny scripted Agent program for tests of the platform's
// orchestration: it speaks a line protocol on stdin and stdout, admits inputs,
// answers them one response at a time in accepted order (an input sent while it
// works waits in its own queue), and stops a response on interrupt. It runs in a real
// box under the in-box runner, whose journal is its replayable record.
//
// Input lines: {"op":"submit","input_id":..,"text":..},
// {"op":"interrupt","cancel_queued":bool},
// {"op":"answer","interaction_id":..,"decision":..} and
// {"op":"stop_child","control_ref":..}. A text "slow:N:MS" answers with N parts MS
// milliseconds apart; "ask" first asks a question (interaction ask-<input_id>) and
// continues once answered; "late" answers like any text but writes its completed
// turn to the log half a second after reporting the end; "noise" first writes an event no translator knows (a
// runtime diagnostic); "delegate" starts a child agent (child-<input_id>, control
// reference ctl-<input_id>) that keeps running after the response until stopped; any
// other text answers with three parts at once.
//
// Admitted inputs (before the admission is reported) and completed turns (before the
// end is reported) are appended to $SCRIPTAGENT_HOME/<conversation>.jsonl, the
// program's native conversation log.
//
// Output lines (one vendor event each): admitted, status, started, delta, ended, child
// (a child agent's status: running, then stopped). A
// delta carries at_us, when it was written, so benchmarks can measure the platform's
// event-to-committed-part latency.
//
// "scriptagent serve PORT GREETING" is instead a resident service, an image entry
// point: it listens on 127.0.0.1:PORT and writes GREETING and its environment's
// SCRIPTAGENT_SERVE_NOTE to every connection. A PORT of "fail" writes a reason and exits
// 3 without listening, as a service that cannot serve does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type command struct {
	Op           string `json:"op"`
	InputID      string `json:"input_id"`
	Text         string `json:"text"`
	CancelQueued bool   `json:"cancel_queued"`
	Interaction  string `json:"interaction_id"`
	Decision     string `json:"decision"`
	ControlRef   string `json:"control_ref"`
}

type event map[string]any

type response struct {
	id      string
	inputID string
	left    int
	gap     time.Duration
	n       int
	// asking is the interaction the response waits on; segment numbers its text parts.
	asking  string
	ask     bool
	segment int
	// late writes the completed turn to the transcript lateTurn after the end.
	late bool
}

// lateTurn is how long after its end a "late" input's turn reaches the transcript.
const lateTurn = 500 * time.Millisecond

func (r *response) textID() string { return fmt.Sprintf("t%d", r.segment) }

func main() {
	if len(os.Args) == 4 && os.Args[1] == "serve" {
		os.Exit(serve(os.Args[2], os.Args[3]))
	}
	conversation := "default"
	for i, a := range os.Args {
		if a == "--conversation" && i+1 < len(os.Args) {
			conversation = os.Args[i+1]
		}
	}
	dir := os.Getenv("SCRIPTAGENT_HOME")
	if dir == "" {
		dir = os.TempDir()
	}
	_ = os.MkdirAll(dir, 0o700)
	transcript := filepath.Join(dir, conversation+".jsonl")
	out := bufio.NewWriter(os.Stdout)
	emit := func(e event) {
		b, _ := json.Marshal(e)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	lines := make(chan command)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var c command
			if json.Unmarshal(sc.Bytes(), &c) == nil {
				lines <- c
			}
		}
		close(lines)
	}()
	var queue []command
	var cur *response
	admitted := map[string]bool{}
	// children are the running child agents by control reference.
	children := map[string]string{}
	timer := time.NewTimer(time.Hour)
	for {
		if cur == nil && len(queue) > 0 {
			next := queue[0]
			queue = queue[1:]
			cur = &response{id: "resp-" + next.InputID, inputID: next.InputID, left: 3, segment: 1, ask: next.Text == "ask", late: next.Text == "late"}
			if n, gap, ok := parseSlow(next.Text); ok {
				cur.left, cur.gap = n, gap
			}
			emit(event{"ev": "status", "status": "working"})
			emit(event{"ev": "started", "response_id": cur.id, "input_ids": []string{cur.inputID}, "text_id": cur.textID()})
			if cur.ask {
				// Ask before any output; the response waits for the answer.
				cur.asking = "ask-" + cur.inputID
				emit(event{"ev": "ask", "response_id": cur.id, "interaction_id": cur.asking, "text_id": cur.textID()})
				continue
			}
			if next.Text == "noise" {
				// Output the platform does not translate: it keeps it as a diagnostic.
				emit(event{"ev": "noise", "input_id": next.InputID})
			}
			if next.Text == "delegate" {
				child, ref := "child-"+next.InputID, "ctl-"+next.InputID
				children[ref] = child
				emit(event{"ev": "child", "response_id": cur.id, "child": child, "control_ref": ref, "status": "running", "text": "explore"})
			}
			timer.Reset(0)
		}
		select {
		case c, ok := <-lines:
			if !ok {
				return
			}
			switch c.Op {
			case "submit":
				if admitted[c.InputID] {
					continue // the runner already deduplicates; this is the program's own guard
				}
				admitted[c.InputID] = true
				// Like Claude Code, the program holds an input durably (its user turn in
				// the conversation log) before the platform hears it admitted.
				record(transcript, event{"input_id": c.InputID, "text": c.Text})
				emit(event{"ev": "admitted", "input_id": c.InputID})
				queue = append(queue, c)
			case "answer":
				if cur == nil || cur.asking == "" || cur.asking != c.Interaction {
					continue
				}
				cur.asking = ""
				cur.segment++
				emit(event{"ev": "answered", "response_id": cur.id, "interaction_id": c.Interaction, "decision": c.Decision, "input_ids": []string{cur.inputID}, "text_id": cur.textID()})
				timer.Reset(0)
			case "stop_child":
				child, ok := children[c.ControlRef]
				if !ok {
					continue
				}
				delete(children, c.ControlRef)
				emit(event{"ev": "child", "child": child, "control_ref": c.ControlRef, "status": "stopped", "text": "explore"})
			case "interrupt":
				if c.CancelQueued {
					queue = nil
				}
				if cur != nil {
					emit(event{"ev": "ended", "response_id": cur.id, "outcome": "cancelled", "native_reason": "interrupted", "text_id": cur.textID()})
					cur = nil
					if len(queue) == 0 {
						emit(event{"ev": "status", "status": "idle"})
					}
				}
			}
		case <-timer.C:
			if cur == nil || cur.asking != "" {
				continue
			}
			cur.n++
			emit(event{"ev": "delta", "response_id": cur.id, "text": fmt.Sprintf("part-%d ", cur.n), "at_us": time.Now().UnixMicro(), "text_id": cur.textID()})
			cur.left--
			if cur.left > 0 {
				timer.Reset(cur.gap)
				continue
			}
			// The turn is in the transcript before the program reports it ended: a
			// restart (or a replacement box given this transcript) resumes after it.
			// A "late" input's turn is written lateTurn after, as Claude Code writes
			// its transcript after its stdout.
			turn := event{"input_id": cur.inputID, "response_id": cur.id}
			if cur.late {
				time.AfterFunc(lateTurn, func() { record(transcript, turn) })
			} else {
				record(transcript, turn)
			}
			emit(event{"ev": "ended", "response_id": cur.id, "outcome": "completed", "native_reason": "end_turn", "text_id": cur.textID()})
			cur = nil
			if len(queue) == 0 {
				emit(event{"ev": "status", "status": "idle"})
			}
		}
	}
}

// record appends one entry to the transcript and syncs it.
func record(path string, e event) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "transcript:", err)
		return
	}
	defer f.Close()
	b, _ := json.Marshal(e)
	_, _ = f.Write(append(b, '\n'))
	_ = f.Sync()
}

func parseSlow(text string) (int, time.Duration, bool) {
	f := strings.Split(text, ":")
	if len(f) != 3 || f[0] != "slow" {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(f[1])
	ms, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || n < 1 {
		return 0, 0, false
	}
	return n, time.Duration(ms) * time.Millisecond, true
}

// serve is the resident-service mode (see the package comment).
func serve(port, greeting string) int {
	if port == "fail" {
		fmt.Println("scriptagent serve: no model configured, cannot serve")
		return 3
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Println("scriptagent serve:", err)
		return 1
	}
	fmt.Println("scriptagent serve: listening on", ln.Addr())
	for {
		conn, err := ln.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintf(conn, "%s %s\n", greeting, os.Getenv("SCRIPTAGENT_SERVE_NOTE"))
		conn.Close()
	}
}
