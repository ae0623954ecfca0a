package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiClient speaks the public API with one bearer token, timing nothing itself.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(base, token string) *apiClient {
	// Many Sessions post and stream at once: keep a connection per concurrent call.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4096
	tr.MaxIdleConnsPerHost = 4096
	return &apiClient{base: base, token: token, http: &http.Client{Transport: tr}}
}

// call sends a JSON request and decodes the envelope's data into out.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	return c.callWith(ctx, method, path, nil, body, out)
}

// callWith is call with extra request headers.
func (c *apiClient) callWith(ctx context.Context, method, path string, header map[string]string, body, out any) error {
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, payload)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: decode envelope: %w", method, path, err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s %s: decode data: %w", method, path, err)
	}
	return nil
}

// streamed is what one follower read of one response.
type streamed struct {
	// firstPart is when the first part arrived.
	firstPart time.Time
	// at holds the arrival of each part by seq.
	at map[int64]time.Time
	// last is the seq of the last part read.
	last int64
	// unordered counts the parts whose seq did not follow the one before (a part
	// repeated, or one missing before it): the log's seqs have no gaps.
	unordered int
}

// follow opens the Session's stream after seq and returns once the server has
// answered (subscribed), with a function that reads it to [DONE].
func (c *apiClient) follow(ctx context.Context, sessionID string, after int64) (func() (streamed, error), error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/sessions/%s/stream?after_seq=%d", c.base, sessionID, after), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("open stream: %d: %s", resp.StatusCode, raw)
	}
	return func() (streamed, error) {
		defer resp.Body.Close()
		out := streamed{at: map[int64]time.Time{}, last: after}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var pending time.Time
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			now := time.Now()
			if data == "[DONE]" {
				return out, nil
			}
			if !strings.Contains(data, `"data-resume-cursor"`) {
				if out.firstPart.IsZero() {
					out.firstPart = now
				}
				pending = now
				continue
			}
			var cursor struct {
				Data struct {
					Seq int64 `json:"seq"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(data), &cursor); err != nil {
				return out, fmt.Errorf("decode resume cursor: %w", err)
			}
			if cursor.Data.Seq != out.last+1 {
				out.unordered++
			}
			out.at[cursor.Data.Seq] = pending
			out.last = cursor.Data.Seq
		}
		if err := sc.Err(); err != nil {
			return out, fmt.Errorf("read stream: %w", err)
		}
		return out, fmt.Errorf("stream of %s ended without [DONE] after seq %d", sessionID, out.last)
	}, nil
}
