package engines

import (
	"encoding/json"
	"errors"
	"fmt"
)

// InteractionPresentation is how a person can answer an interaction.
type InteractionPresentation string

// The interaction presentations.
const (
	// PresentationForm: the person fills a form described by a JSON Schema object.
	PresentationForm InteractionPresentation = "form"
	// PresentationDecision: the person picks one of the declared options.
	PresentationDecision InteractionPresentation = "decision"
	// PresentationToolApproval: the person approves or denies one tool call.
	PresentationToolApproval InteractionPresentation = "tool_approval"
)

// The decisions of a tool approval answer.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// InteractionContract declares how a person can answer an interaction and carries the
// vendor's identity and meaning unchanged. Build it with FormContract, DecisionContract
// or ToolApprovalContract and check it with ValidateInteractionContract.
type InteractionContract struct {
	// Presentation is how a person can answer.
	Presentation InteractionPresentation `json:"presentation"`
	// Native is the vendor's request, unchanged.
	Native NativeRequest `json:"native"`
	// Title is a short heading, in the vendor's words when it gives one.
	Title string `json:"title,omitempty"`
	// Prompt is the question or explanation shown to the person.
	Prompt string `json:"prompt,omitempty"`
	// Schema is the form's JSON Schema object (form only).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Options are the declared choices (decision; optional extra choices of a tool
	// approval, such as a vendor's "acceptForSession"; a form's answers without
	// values, such as a vendor's "decline").
	Options []DecisionOption `json:"options,omitempty"`
	// Tool identifies the tool call to approve (tool approval only).
	Tool *ToolApprovalSubject `json:"tool,omitempty"`
}

// NativeRequest is the vendor's own identity and payload for an interaction.
type NativeRequest struct {
	// Type is the vendor's request type, e.g. "can_use_tool" or
	// "item/commandExecution/requestApproval".
	Type string `json:"type"`
	// ID is the vendor's request id.
	ID string `json:"id"`
	// Payload is the vendor's request verbatim.
	Payload json.RawMessage `json:"payload"`
}

// DecisionOption is one declared choice; ID is the vendor's value, unchanged.
type DecisionOption struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// ToolApprovalSubject is the tool call a tool approval is about, verbatim.
type ToolApprovalSubject struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
}

// InteractionAnswer is a person's answer. Its shape follows the contract's
// presentation: Decision is "approve" or "deny" (or a declared option id) for a tool
// approval and an option id for a decision; Values is the filled form object, or
// Decision one of the form's declared options instead.
type InteractionAnswer struct {
	Decision string          `json:"decision,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Values   json.RawMessage `json:"values,omitempty"`
}

// FormContract builds a form interaction; schema is a JSON Schema object.
func FormContract(native NativeRequest, title string, schema json.RawMessage) InteractionContract {
	return InteractionContract{Presentation: PresentationForm, Native: native, Title: title, Schema: schema}
}

// DecisionContract builds a decision among declared options.
func DecisionContract(native NativeRequest, prompt string, options ...DecisionOption) InteractionContract {
	return InteractionContract{Presentation: PresentationDecision, Native: native, Prompt: prompt, Options: options}
}

// ToolApprovalContract builds a tool approval for one tool call; extra lists vendor
// choices beyond approve and deny.
func ToolApprovalContract(native NativeRequest, toolCallID, toolName string, input json.RawMessage, extra ...DecisionOption) InteractionContract {
	return InteractionContract{
		Presentation: PresentationToolApproval, Native: native, Options: extra,
		Tool: &ToolApprovalSubject{ToolCallID: toolCallID, ToolName: toolName, Input: input},
	}
}

// ValidateInteractionContract checks that a contract declares a usable way to answer
// and carries the vendor's identity.
func ValidateInteractionContract(c InteractionContract) error {
	var errs []error
	if c.Native.Type == "" || c.Native.ID == "" {
		errs = append(errs, errors.New("contract lacks the vendor's request type and id"))
	}
	if len(c.Native.Payload) > 0 && !json.Valid(c.Native.Payload) {
		errs = append(errs, errors.New("contract native payload is not JSON"))
	}
	errs = append(errs, checkOptions(c.Options))
	switch c.Presentation {
	case PresentationForm:
		var schema map[string]json.RawMessage
		if err := json.Unmarshal(c.Schema, &schema); err != nil || schema == nil {
			errs = append(errs, errors.New("form contract schema is not a JSON object"))
		} else if t, ok := schema["type"]; ok && string(t) != `"object"` {
			errs = append(errs, fmt.Errorf("form contract schema type is %s, not \"object\"", t))
		}
	case PresentationDecision:
		if len(c.Options) == 0 {
			errs = append(errs, errors.New("decision contract declares no options"))
		}
	case PresentationToolApproval:
		switch {
		case c.Tool == nil:
			errs = append(errs, errors.New("tool approval contract names no tool call"))
		case c.Tool.ToolCallID == "" || c.Tool.ToolName == "":
			errs = append(errs, errors.New("tool approval contract lacks tool_call_id or tool_name"))
		case len(c.Tool.Input) > 0 && !json.Valid(c.Tool.Input):
			errs = append(errs, errors.New("tool approval input is not JSON"))
		}
		for _, o := range c.Options {
			if o.ID == DecisionApprove || o.ID == DecisionDeny {
				errs = append(errs, fmt.Errorf("tool approval option %q repeats a built-in decision", o.ID))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("contract presentation %q is not form, decision or tool_approval", c.Presentation))
	}
	return errors.Join(errs...)
}

func checkOptions(options []DecisionOption) error {
	seen := map[string]bool{}
	for _, o := range options {
		if o.ID == "" || o.Label == "" {
			return errors.New("contract option lacks id or label")
		}
		if seen[o.ID] {
			return fmt.Errorf("contract option %q declared twice", o.ID)
		}
		seen[o.ID] = true
	}
	return nil
}

// ValidateInteractionAnswer checks that an answer fits the contract's presentation.
func ValidateInteractionAnswer(c InteractionContract, a InteractionAnswer) error {
	hasOption := func(id string) bool {
		for _, o := range c.Options {
			if o.ID == id {
				return true
			}
		}
		return false
	}
	switch c.Presentation {
	case PresentationToolApproval:
		if a.Decision != DecisionApprove && a.Decision != DecisionDeny && !hasOption(a.Decision) {
			return fmt.Errorf("answer decision %q is not approve, deny or a declared option", a.Decision)
		}
	case PresentationDecision:
		if !hasOption(a.Decision) {
			return fmt.Errorf("answer decision %q is not a declared option", a.Decision)
		}
	case PresentationForm:
		// A form may declare options that answer it without values (a vendor's
		// "decline"): the decision then stands for the whole form.
		if a.Decision != "" {
			if !hasOption(a.Decision) {
				return fmt.Errorf("answer decision %q is not a declared option of the form", a.Decision)
			}
			return nil
		}
		var values map[string]json.RawMessage
		if err := json.Unmarshal(a.Values, &values); err != nil || values == nil {
			return errors.New("form answer values are not a JSON object")
		}
		var schema struct {
			Required []string `json:"required"`
		}
		_ = json.Unmarshal(c.Schema, &schema)
		for _, r := range schema.Required {
			if _, ok := values[r]; !ok {
				return fmt.Errorf("form answer lacks required field %q", r)
			}
		}
	default:
		return fmt.Errorf("contract presentation %q is not answerable", c.Presentation)
	}
	return nil
}
