package activities

import (
	"context"
	"encoding/json"
	"strings"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/titles"
)

// Titler writes a Session title from its first message and the reply to it, through
// the deployment's model service (titles.Generator).
type Titler interface {
	Title(ctx context.Context, c titles.Conversation) (string, error)
}

// maybeTitle asks for an automatic title after a response ended, when titles are
// enabled, the Session has none, and one of its first TitleResponses responses ended
// completed that no title was asked from yet. The title is written in the background
// (the reader keeps reading), one at a time, and stored only while the Session still
// has no title: one its owner set meanwhile is never replaced (store.SetAutoTitle). A
// title lost with its reader (the reader stopped first) is asked again from the next
// of the first responses.
func (r *relayRun) maybeTitle(ctx context.Context) {
	if r.a.deps.Titles == nil || r.titleBusy.Load() {
		return
	}
	sess, err := r.a.deps.Store.GetSessionByID(ctx, r.l.sessionID)
	if err != nil || sess.Title != nil {
		return
	}
	responses, err := r.a.deps.Store.ListResponsesBySession(ctx, r.l.sessionID)
	if err != nil {
		r.log.Warn("automatic title: list responses", zap.Error(err))
		return
	}
	if r.titleTried == nil {
		r.titleTried = map[string]bool{}
	}
	for i, resp := range responses {
		if i >= r.a.set.TitleResponses {
			return
		}
		if resp.Outcome == nil || *resp.Outcome != store.OutcomeCompleted || r.titleTried[resp.ResponseID] {
			continue
		}
		r.titleTried[resp.ResponseID] = true
		r.titleBusy.Store(true)
		r.titling.Add(1)
		go func() {
			defer r.titling.Done()
			defer r.titleBusy.Store(false)
			r.writeTitle(ctx, resp)
		}()
		return
	}
}

// writeTitle asks for a title of the conversation up to resp and stores it unless
// the Session got one meanwhile.
func (r *relayRun) writeTitle(ctx context.Context, resp store.Response) {
	log := r.log.With(zap.String("response_id", resp.ResponseID))
	conv, err := r.conversationOf(ctx, resp)
	if err != nil {
		log.Warn("automatic title: read the conversation", zap.Error(err))
		return
	}
	title, err := r.a.deps.Titles.Title(ctx, conv)
	if err != nil {
		log.Warn("automatic title", zap.Error(err))
		return
	}
	// A title written is stored even when the reader is stopping meanwhile: the write is
	// short, and asking the model service again would cost more.
	set, err := r.a.deps.Store.SetAutoTitle(context.WithoutCancel(ctx), r.l.sessionID, title)
	if err != nil {
		log.Warn("automatic title: store", zap.Error(err))
		return
	}
	log.Info("automatic title", zap.Bool("stored", set))
}

// conversationOf is the first message a response answers and the response's text.
func (r *relayRun) conversationOf(ctx context.Context, resp store.Response) (titles.Conversation, error) {
	var conv titles.Conversation
	var inputIDs []string
	if len(resp.InputIDs) > 0 {
		if err := json.Unmarshal(resp.InputIDs, &inputIDs); err != nil {
			return conv, err
		}
	}
	if len(inputIDs) > 0 {
		in, err := r.a.deps.Store.GetInputByID(ctx, inputIDs[0])
		if err != nil {
			return conv, err
		}
		conv.Message = in.Content
	}
	parts, err := r.a.deps.Store.ListResponseParts(ctx, r.l.sessionID, []string{resp.ResponseID})
	if err != nil {
		return conv, err
	}
	var reply strings.Builder
	for _, p := range parts {
		var f struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal(p.Frame, &f) == nil && f.Type == "text-delta" {
			reply.WriteString(f.Delta)
		}
	}
	conv.Reply = reply.String()
	return conv, nil
}
