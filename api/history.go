package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

const (
	defaultMessagesLimit = 50
	maxMessagesLimit     = 200
)

// timelineItem is one message of the conversation: an input or a response, ordered by
// when it was accepted or started.
type timelineItem struct {
	at       time.Time
	kind     int // -1 imported, 0 input, 1 response: an input sorts before a response started with it
	id       string
	imported *store.ImportedMessage
	input    *store.Input
	response *store.Response
}

func (t timelineItem) key() string {
	return strconv.FormatInt(t.at.UnixMicro(), 10) + "." + strconv.Itoa(t.kind) + "." + t.id
}

func (t timelineItem) less(o timelineItem) bool {
	if !t.at.Equal(o.at) {
		return t.at.Before(o.at)
	}
	if t.kind != o.kind {
		return t.kind < o.kind
	}
	return t.id < o.id
}

// messagePage is a page of the recorded conversation.
type messagePage struct {
	Messages []uiMessage `json:"messages"`
	HasMore  bool        `json:"has_more"`
	// Before pages further back; null on the oldest page.
	Before *string `json:"before"`
	// OutputSeq (first page only) is the position to follow the stream from for the
	// rest of an active response.
	OutputSeq *int64 `json:"output_seq,omitempty"`
	// ReplaySeq (first page only, while a response is open) is the position just before
	// that response's first part: a client that must rebuild the response reads the
	// stream from it.
	ReplaySeq *int64 `json:"replay_seq,omitempty"`
}

// listMessages returns the recorded conversation as AI SDK UI messages, one per input
// and one per response, newest page first; page back with before. Retracted previews
// are omitted. The first page includes an active response's parts so far.
func (s *Server) listMessages(c *gin.Context) {
	page, _, err := s.messagePage(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, page)
}

// messagePage reads one page of messages and the frames of its responses by id.
func (s *Server) messagePage(c *gin.Context) (messagePage, map[string][]engines.Frame, error) {
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		return messagePage{}, nil, err
	}
	if err := knownQuery(c, "before", "limit"); err != nil {
		return messagePage{}, nil, err
	}
	limit, err := queryInt(c, "limit", defaultMessagesLimit, 1, maxMessagesLimit)
	if err != nil {
		return messagePage{}, nil, err
	}
	before, hasBefore := c.GetQuery("before")
	var beforeKey string
	if hasBefore {
		raw, err := base64.RawURLEncoding.DecodeString(before)
		if err != nil || strings.Count(string(raw), ".") < 2 {
			return messagePage{}, nil, InvalidRequest("before", "is not a cursor a messages page returned")
		}
		beforeKey = string(raw)
	}
	// One snapshot for every read: the output position the page gives to follow the
	// stream from must be the one its parts were read at, or a client following on
	// would read parts again (a position older than the parts) or miss some (newer).
	var (
		page   messagePage
		frames map[string][]engines.Frame
	)
	err = s.store.InSnapshot(c.Request.Context(), func(tx *store.Store) error {
		var err error
		page, frames, err = readMessagePage(c.Request.Context(), tx, sess.ID, int(limit), hasBefore, beforeKey)
		return err
	})
	return page, frames, err
}

// readMessagePage reads one page of messages from st (a snapshot): before, when
// hasBefore, is the key of the item the page ends before.
func readMessagePage(ctx context.Context, st Store, sessionID string, limit int, hasBefore bool, beforeKey string) (messagePage, map[string][]engines.Frame, error) {
	inputs, err := st.ListInputsBySession(ctx, sessionID)
	if err != nil {
		return messagePage{}, nil, err
	}
	responses, err := st.ListResponsesBySession(ctx, sessionID)
	if err != nil {
		return messagePage{}, nil, err
	}
	imported, err := st.ListImportedMessagesBySession(ctx, sessionID)
	if err != nil {
		return messagePage{}, nil, err
	}
	items := make([]timelineItem, 0, len(imported)+len(inputs)+len(responses))
	// Imported history comes before the conversation, in its import order.
	for i := range imported {
		items = append(items, timelineItem{kind: -1, id: fmt.Sprintf("%08d", imported[i].Position), imported: &imported[i]})
	}
	for i := range inputs {
		items = append(items, timelineItem{at: inputs[i].AcceptedAt, kind: 0, id: inputs[i].ID, input: &inputs[i]})
	}
	for i := range responses {
		items = append(items, timelineItem{at: responses[i].StartedAt, kind: 1, id: responses[i].ResponseID, response: &responses[i]})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].less(items[j]) })
	end := len(items)
	if hasBefore {
		end = sort.Search(len(items), func(i int) bool { return !keyBefore(items[i], beforeKey) })
	}
	start := max(0, end-limit)
	pageItems := items[start:end]

	var ids []string
	for _, it := range pageItems {
		if it.response != nil {
			ids = append(ids, it.response.ResponseID)
		}
	}
	parts, err := st.ListResponseParts(ctx, sessionID, ids)
	if err != nil {
		return messagePage{}, nil, err
	}
	frames := map[string][]engines.Frame{}
	for _, p := range parts {
		f, err := engines.ParseFrame(p.Frame)
		if err == nil && p.ResponseID != nil {
			frames[*p.ResponseID] = append(frames[*p.ResponseID], f)
		}
	}
	out := messagePage{Messages: make([]uiMessage, len(pageItems)), HasMore: start > 0}
	for i, it := range pageItems {
		if it.imported != nil {
			out.Messages[i] = importedUIMessage(*it.imported)
			continue
		}
		if it.input != nil {
			out.Messages[i] = inputMessage(*it.input)
			continue
		}
		out.Messages[i] = responseMessage(*it.response, engines.OmitRetracted(frames[it.response.ResponseID]))
	}
	if start > 0 {
		cursor := base64.RawURLEncoding.EncodeToString([]byte(pageItems[0].key()))
		out.Before = &cursor
	}
	if !hasBefore {
		sess, err := st.GetSessionByID(ctx, sessionID)
		if err != nil {
			return messagePage{}, nil, err
		}
		seq := sess.OutputSeq
		out.OutputSeq = &seq
		for _, r := range responses {
			if r.Outcome == nil {
				replay := r.StartedSeq - 1
				out.ReplaySeq = &replay
				break
			}
		}
	}
	return out, frames, nil
}

// keyBefore reports whether item sorts before the item the cursor names.
func keyBefore(item timelineItem, key string) bool {
	parts := strings.SplitN(key, ".", 3)
	micros, err1 := strconv.ParseInt(parts[0], 10, 64)
	kind, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return item.less(timelineItem{at: time.UnixMicro(micros), kind: kind, id: parts[2]})
}

// inputMessage is a person's message as a user UI message; its id is the
// client_message_id when one was given, so a console's own message id matches.
func inputMessage(in store.Input) uiMessage {
	id := in.ID
	if in.ClientMessageID != nil {
		id = *in.ClientMessageID
	}
	meta := map[string]any{"input_id": in.ID, "client_message_id": in.ClientMessageID, "state": in.State,
		"accepted_at": in.AcceptedAt.UTC()}
	if in.FailureCode != nil {
		failure := inputFailure{Code: *in.FailureCode}
		if in.FailureMessage != nil {
			failure.Message = *in.FailureMessage
		}
		meta["failure"] = failure
	}
	return uiMessage{ID: id, Role: "user", Metadata: meta, Parts: []map[string]any{{"type": "text", "text": in.Content}}}
}

// responseMessage is a response as an assistant UI message, assembled from its
// recorded parts; the recorded outcome is authoritative in its metadata.
func responseMessage(r store.Response, frames []engines.Frame) uiMessage {
	a := newAssembler(r.ResponseID, "assistant")
	for _, f := range frames {
		a.add(f)
	}
	m := a.msg
	var inputIDs []string
	_ = json.Unmarshal(r.InputIDs, &inputIDs)
	m.Metadata["response_id"] = r.ResponseID
	m.Metadata["origin"] = r.Origin
	m.Metadata["input_ids"] = inputIDs
	m.Metadata["outcome"] = r.Outcome
	m.Metadata["native_reason"] = r.NativeReason
	m.Metadata["open"] = r.Outcome == nil
	if len(r.Usage) > 0 {
		m.Metadata["usage"] = json.RawMessage(r.Usage)
	}
	return m
}

// responseWithParts assembles one response's UI message from its recorded parts.
func (s *Server) responseWithParts(c *gin.Context, sessionID string, r store.Response) (uiMessage, error) {
	parts, err := s.store.ListResponseParts(c.Request.Context(), sessionID, []string{r.ResponseID})
	if err != nil {
		return uiMessage{}, err
	}
	frames := make([]engines.Frame, 0, len(parts))
	for _, p := range parts {
		if f, err := engines.ParseFrame(p.Frame); err == nil {
			frames = append(frames, f)
		}
	}
	return responseMessage(r, engines.OmitRetracted(frames)), nil
}
