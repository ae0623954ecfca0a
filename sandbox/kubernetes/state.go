package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/astrabox/astrabox/sandbox"
)

// boxState is what the cluster says about one box now.
type boxState struct {
	id string
	// owner is the object the box id names: the Sandbox of a box made cold, or
	// the SandboxClaim of one claimed from a warm pool.
	owner *unstructured.Unstructured
	// sb is the Sandbox itself (nil while a claim waits for one).
	sb           *unstructured.Unstructured
	sandboxName  string
	ready        bool
	readyMessage string
	suspended    bool
	serviceFQDN  string
	death        *sandbox.Death
}

// observe reads a box's objects. A box this deployment never made, or one
// deleted, is sandbox.ErrNotFound.
func (b *Backend) observe(ctx context.Context, id string) (boxState, error) {
	st := boxState{id: id}
	ns := b.opts.Namespace
	sb, err := b.opts.Client.Resource(SandboxResource).Namespace(ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case err == nil:
		if sb.GetLabels()[LabelManagedBy] != b.opts.Instance {
			return st, fmt.Errorf("box %q: %w: %w", id, errNotOurs, sandbox.ErrNotFound)
		}
		st.owner, st.sb, st.sandboxName = sb, sb, id
	case apierrors.IsNotFound(err):
		claim, cerr := b.opts.Client.Resource(ClaimResource).Namespace(ns).Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(cerr) {
			return st, fmt.Errorf("box %q: %w", id, sandbox.ErrNotFound)
		}
		if cerr != nil {
			return st, fmt.Errorf("get SandboxClaim %s: %w", id, cerr)
		}
		if claim.GetLabels()[LabelManagedBy] != b.opts.Instance {
			return st, fmt.Errorf("box %q: %w: %w", id, errNotOurs, sandbox.ErrNotFound)
		}
		st.owner = claim
		st.sandboxName, _, _ = unstructured.NestedString(claim.Object, "status", "sandbox", "name")
		if st.sandboxName == "" {
			st.readyMessage = "the SandboxClaim has no Sandbox yet"
			return st, nil
		}
		sb, err := b.opts.Client.Resource(SandboxResource).Namespace(ns).Get(ctx, st.sandboxName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			st.death = &sandbox.Death{BoxID: id, Reason: "vanished", At: time.Now().UTC(),
				Message: fmt.Sprintf("the claimed Sandbox %s is gone", st.sandboxName)}
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("get Sandbox %s: %w", st.sandboxName, err)
		}
		st.sb = sb
	default:
		return st, fmt.Errorf("get Sandbox %s: %w", id, err)
	}
	st.read()
	return st, nil
}

// read derives readiness, suspension and death from the Sandbox's conditions.
func (st *boxState) read() {
	mode, _, _ := unstructured.NestedString(st.sb.Object, "spec", "operatingMode")
	st.suspended = mode == "Suspended"
	st.serviceFQDN, _, _ = unstructured.NestedString(st.sb.Object, "status", "serviceFQDN")
	conds, _, _ := unstructured.NestedSlice(st.sb.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch typ {
		case "Ready":
			st.ready = status == "True" && st.serviceFQDN != ""
			st.readyMessage = reason + ": " + msg
		case "Finished":
			if status != "True" {
				continue
			}
			d := &sandbox.Death{BoxID: st.id, Reason: "runner_exited", Message: reason + ": " + msg, At: time.Now().UTC()}
			if reason == "SandboxExpired" {
				d.Reason = "expired"
			}
			st.death = d
		}
	}
	if ts := st.sb.GetDeletionTimestamp(); ts != nil && st.death == nil {
		st.death = &sandbox.Death{BoxID: st.id, Reason: "destroyed", Message: "the Sandbox is being deleted", At: ts.UTC()}
	}
}

// info describes a box from its state.
func (st boxState) info() sandbox.Info {
	in := sandbox.Info{ID: st.id, State: sandbox.StatePending, CreatedAt: st.owner.GetCreationTimestamp().UTC(),
		ProfileKey: st.owner.GetAnnotations()[AnnotationProfile]}
	if raw := st.owner.GetAnnotations()[AnnotationMetadata]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &in.Metadata)
	}
	switch {
	case st.death != nil:
		d := *st.death
		in.Death, in.State = &d, sandbox.StateFailed
		if d.Reason == "destroyed" || d.Reason == "expired" || d.Reason == "released" {
			in.State = sandbox.StateTerminated
		}
	case st.suspended:
		in.State = sandbox.StatePaused
	case st.ready:
		in.State = sandbox.StateRunning
	}
	return in
}
