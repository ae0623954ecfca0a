package engines

import (
	"encoding/json"
	"slices"
)

// AstraBoxProvider is the providerMetadata key under which AstraBox keeps its own
// chunk metadata.
const AstraBoxProvider = "astrabox"

// RetractionMetadata is the messageMetadata of a retraction: every part id withdrawn
// from the response so far.
type RetractionMetadata struct {
	RetractedPartIDs []string `json:"retracted_part_ids"`
}

// WithPartID marks the opening chunk of a text or reasoning preview the adapter may
// later withdraw: it sets providerMetadata.astrabox.part_id to the chunk's id, keeping
// any other provider metadata.
func WithPartID(f Frame) Frame {
	id := f.StringField("id")
	if id == "" {
		return f
	}
	meta := map[string]map[string]json.RawMessage{}
	if raw, ok := f.Field("providerMetadata"); ok {
		_ = json.Unmarshal(raw, &meta)
	}
	if meta[AstraBoxProvider] == nil {
		meta[AstraBoxProvider] = map[string]json.RawMessage{}
	}
	idJSON, _ := json.Marshal(id)
	meta[AstraBoxProvider]["part_id"] = idJSON
	raw, _ := json.Marshal(meta)
	return f.WithRaw("providerMetadata", raw)
}

// PartID returns the providerMetadata.astrabox.part_id of a chunk, if any.
func PartID(f Frame) (string, bool) {
	raw, ok := f.Field("providerMetadata")
	if !ok {
		return "", false
	}
	var meta map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return "", false
	}
	var id string
	if json.Unmarshal(meta[AstraBoxProvider]["part_id"], &id) != nil || id == "" {
		return "", false
	}
	return id, true
}

// Retractions keeps the cumulative retracted part ids of one response. The adapter,
// not the platform, decides whether native output is provisional or superseded; a
// withdrawal never removes completed steps.
type Retractions struct {
	ids []string
}

// Retract withdraws a marked preview and returns the message-metadata part to publish:
// it carries every part id retracted from the response so far.
func (r *Retractions) Retract(partID string) Frame {
	if !slices.Contains(r.ids, partID) {
		r.ids = append(r.ids, partID)
	}
	return RetractionFrame(r.ids)
}

// RetractionFrame is the message-metadata part that withdraws the given part ids: every
// id retracted from the response so far, since each such part replaces the last. An
// adapter whose translation state travels in its cursors keeps the ids there and
// builds the part with this.
func RetractionFrame(retractedPartIDs []string) Frame {
	raw, _ := json.Marshal(RetractionMetadata{RetractedPartIDs: slices.Clone(retractedPartIDs)})
	return MustFrame(MessageMetadataChunk{MessageMetadata: raw})
}

// RetractedPartIDs returns the ids retracted so far.
func (r *Retractions) RetractedPartIDs() []string { return slices.Clone(r.ids) }

// OmitRetracted returns the frames live messages and stored history display: every
// text or reasoning chunk of a part whose id a later (or earlier) retraction in the
// same frames names is left out. The output log keeps the original chunks and the
// withdrawal for deterministic replay; only presentation omits them. Pass the frames of
// one response: part ids are scoped to their response.
func OmitRetracted(frames []Frame) []Frame {
	retracted := map[string]bool{}
	marked := map[string]bool{}
	for _, f := range frames {
		if id, ok := PartID(f); ok {
			marked[id] = true
		}
		if f.Type() != "message-metadata" {
			continue
		}
		raw, _ := f.Field("messageMetadata")
		var meta RetractionMetadata
		if json.Unmarshal(raw, &meta) == nil {
			for _, id := range meta.RetractedPartIDs {
				retracted[id] = true
			}
		}
	}
	out := make([]Frame, 0, len(frames))
	for _, f := range frames {
		switch f.Type() {
		case "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta", "reasoning-end":
			// Only parts the adapter marked as previews can be withdrawn.
			if id := f.StringField("id"); retracted[id] && marked[id] {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}
