package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// Response is a response as the runtime reported it.
type Response struct {
	SessionID    string          `gorm:"column:session_id;primaryKey"`
	ResponseID   string          `gorm:"column:response_id;primaryKey"`
	Origin       string          `gorm:"column:origin"`
	InputIDs     json.RawMessage `gorm:"column:input_ids"`
	Outcome      *string         `gorm:"column:outcome"`
	NativeReason *string         `gorm:"column:native_reason"`
	Usage        json.RawMessage `gorm:"column:usage"`
	Error        json.RawMessage `gorm:"column:error"`
	StartedSeq   int64           `gorm:"column:started_seq"`
	EndedSeq     *int64          `gorm:"column:ended_seq"`
	StartedAt    time.Time       `gorm:"column:started_at"`
	EndedAt      *time.Time      `gorm:"column:ended_at"`
}

// TableName is the responses table.
func (Response) TableName() string { return "responses" }

// Interaction is an approval or question a response waits on.
type Interaction struct {
	SessionID     string          `gorm:"column:session_id;primaryKey"`
	InteractionID string          `gorm:"column:interaction_id;primaryKey"`
	ResponseID    *string         `gorm:"column:response_id"`
	Contract      json.RawMessage `gorm:"column:contract"`
	State         string          `gorm:"column:state"`
	Answer        json.RawMessage `gorm:"column:answer"`
	AnsweredBy    *string         `gorm:"column:answered_by"`
	AnswerSavedAt *time.Time      `gorm:"column:answer_saved_at"`
	ClosureReason *string         `gorm:"column:closure_reason"`
	OpenedAt      time.Time       `gorm:"column:opened_at"`
	ClosedAt      *time.Time      `gorm:"column:closed_at"`
}

// TableName is the interactions table.
func (Interaction) TableName() string { return "interactions" }

// RelayOp is one fact of a runtime event a Relay records. Exactly one field is set.
type RelayOp struct {
	// AdmitInput closes custody of an input.
	AdmitInput string
	// StartResponse records a response start (or the complete input ids of a
	// response another input joined).
	StartResponse *ResponseStart
	// Part appends one browser part to the output log.
	Part *NewPart
	// OpenInteraction records an interaction a response waits on.
	OpenInteraction *InteractionOpen
	// CloseInteraction records that the runtime no longer waits on an interaction.
	CloseInteraction *InteractionClose
	// EndResponse records how a response ended.
	EndResponse *ResponseEnd
	// Status is the runtime's own status (idle, working, waiting).
	Status string
}

// ResponseStart is a response the runtime began.
type ResponseStart struct {
	ResponseID string
	Origin     string
	InputIDs   []string
}

// InteractionOpen is an interaction a response waits on.
type InteractionOpen struct {
	InteractionID string
	ResponseID    string
	Contract      json.RawMessage
}

// InteractionClose is the runtime's closure of an interaction: answered, withdrawn or
// expired.
type InteractionClose struct {
	InteractionID string
	Reason        string
}

// ResponseEnd is how a response ended, in the runtime's words.
type ResponseEnd struct {
	ResponseID   string
	Outcome      string
	NativeReason string
	Usage        json.RawMessage
	Error        json.RawMessage
}

// RelayBatch is the facts of consecutive runtime events, written at once.
type RelayBatch struct {
	SessionID       string
	LeaseGeneration int64
	Ops             []RelayOp
	// Cursor is the cursor after the batch's last event, committed with it.
	Cursor *CursorUpdate
}

// ApplyRelayBatch records a Relay's batch in one transaction fenced by its lease
// generation: admissions, responses, interactions, status and parts, with the cursor
// after the last event and a NOTIFY at commit. A superseded generation writes nothing
// and gets ErrLeaseLost, so a zombie Relay cannot write.
func (s *Store) ApplyRelayBatch(ctx context.Context, b RelayBatch) (AppendResult, error) {
	var result AppendResult
	err := s.InTx(ctx, func(tx *Store) error {
		if err := tx.checkLease(ctx, b.SessionID, b.LeaseGeneration); err != nil {
			return err
		}
		sess, err := tx.lockSession(ctx, b.SessionID)
		if err != nil {
			return err
		}
		next := sess.OutputSeq + 1 // the seq the next part of this batch gets
		var parts []NewPart
		for _, op := range b.Ops {
			if err := tx.applyOp(ctx, b.SessionID, op, next, next-1); err != nil {
				return err
			}
			if op.Part != nil {
				parts = append(parts, *op.Part)
				next++
			}
		}
		result, err = tx.AppendParts(ctx, AppendRequest{SessionID: b.SessionID, LeaseGeneration: b.LeaseGeneration, Parts: parts, Cursor: b.Cursor})
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("apply relay batch: %w", err)
	}
	return result, nil
}

// applyOp writes one fact. nextSeq is the seq the next part will get and lastSeq the
// seq of the last part written before this fact.
func (s *Store) applyOp(ctx context.Context, sessionID string, op RelayOp, nextSeq, lastSeq int64) error {
	switch {
	case op.AdmitInput != "":
		return s.admitInputs(ctx, sessionID, []string{op.AdmitInput})
	case op.StartResponse != nil:
		return s.startResponse(ctx, sessionID, *op.StartResponse, nextSeq)
	case op.OpenInteraction != nil:
		o := op.OpenInteraction
		row := Interaction{SessionID: sessionID, InteractionID: o.InteractionID, ResponseID: nonEmpty(o.ResponseID), Contract: o.Contract, State: "open"}
		err := s.conn(ctx).Omit("OpenedAt", "Answer").Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error
		return mapError("open interaction", err)
	case op.CloseInteraction != nil:
		c := op.CloseInteraction
		err := s.conn(ctx).Model(&Interaction{}).
			Where("session_id = ? AND interaction_id = ? AND state = 'open'", sessionID, c.InteractionID).
			Updates(map[string]any{"state": c.Reason, "closure_reason": c.Reason, "closed_at": gormExpr("now()")}).Error
		return mapError("close interaction", err)
	case op.EndResponse != nil:
		return s.endResponse(ctx, sessionID, *op.EndResponse, lastSeq)
	case op.Status != "":
		err := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).
			Updates(map[string]any{"runtime_status": op.Status, "updated_at": gormExpr("now()")}).Error
		return mapError("set runtime status", err)
	}
	return nil
}

func (s *Store) startResponse(ctx context.Context, sessionID string, r ResponseStart, startedSeq int64) error {
	ids := r.InputIDs
	if ids == nil {
		ids = []string{}
	}
	raw, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("encode input ids: %w", err)
	}
	row := Response{SessionID: sessionID, ResponseID: r.ResponseID, Origin: r.Origin, InputIDs: raw, StartedSeq: startedSeq}
	// A repeated start (another input joined, or a reader replays it) keeps the first
	// start and takes the complete input ids.
	err = s.conn(ctx).Omit("StartedAt", "Usage", "Error").Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "session_id"}, {Name: "response_id"}},
		DoUpdates: clause.Assignments(map[string]any{"input_ids": gormExpr("excluded.input_ids")}),
	}).Create(&row).Error
	return mapError("start response", err)
}

func (s *Store) endResponse(ctx context.Context, sessionID string, e ResponseEnd, lastSeq int64) error {
	updates := map[string]any{
		"outcome":       e.Outcome,
		"native_reason": e.NativeReason,
		"ended_seq":     gormExpr("GREATEST(started_seq, ?)", lastSeq),
		"ended_at":      gormExpr("now()"),
	}
	if len(e.Usage) > 0 {
		updates["usage"] = e.Usage
	}
	if len(e.Error) > 0 {
		updates["error"] = e.Error
	}
	res := s.conn(ctx).Model(&Response{}).Where("session_id = ? AND response_id = ? AND outcome IS NULL", sessionID, e.ResponseID).Updates(updates)
	if res.Error != nil {
		return mapError("end response", res.Error)
	}
	if res.RowsAffected == 1 {
		err := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).Update("last_activity_at", gormExpr("now()")).Error
		return mapError("move session to top", err)
	}
	return nil
}

// checkLease locks the Session's lease row and refuses a superseded generation.
func (s *Store) checkLease(ctx context.Context, sessionID string, generation int64) error {
	var lease ReaderLease
	err := s.conn(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
		Where("session_id = ?", sessionID).Take(&lease).Error
	if err != nil {
		if isNotFound(mapError("lock reader lease", err)) {
			return fmt.Errorf("session %s has no reader lease: %w", sessionID, ErrLeaseLost)
		}
		return mapError("lock reader lease", err)
	}
	if lease.Generation != generation {
		return fmt.Errorf("session %s lease generation %d superseded by %d: %w", sessionID, generation, lease.Generation, ErrLeaseLost)
	}
	return nil
}

// ListOpenResponses returns the Session's open responses by start.
func (s *Store) ListOpenResponses(ctx context.Context, sessionID string) ([]Response, error) {
	var out []Response
	err := s.conn(ctx).Where("session_id = ? AND outcome IS NULL", sessionID).Order("started_seq").Find(&out).Error
	return out, mapError("list open responses", err)
}

// ListOpenInteractions returns the Session's open interactions by opening.
func (s *Store) ListOpenInteractions(ctx context.Context, sessionID string) ([]Interaction, error) {
	var out []Interaction
	err := s.conn(ctx).Where("session_id = ? AND state = 'open'", sessionID).Order("opened_at, interaction_id").Find(&out).Error
	return out, mapError("list open interactions", err)
}

// GetInteraction returns one interaction of a Session.
func (s *Store) GetInteraction(ctx context.Context, sessionID, interactionID string) (Interaction, error) {
	var out Interaction
	err := s.conn(ctx).Where("session_id = ? AND interaction_id = ?", sessionID, interactionID).Take(&out).Error
	return out, mapError("get interaction", err)
}

// GetResponse returns one response of a Session.
func (s *Store) GetResponse(ctx context.Context, sessionID, responseID string) (Response, error) {
	var out Response
	err := s.conn(ctx).Where("session_id = ? AND response_id = ?", sessionID, responseID).Take(&out).Error
	return out, mapError("get response", err)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
