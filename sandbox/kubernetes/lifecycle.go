package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// Get returns a handle on a box of this deployment, also one an earlier worker
// made: its runner's address and token are read from the cluster.
func (b *Backend) Get(ctx context.Context, id string) (sandbox.Handle, error) {
	st, err := b.observe(ctx, id)
	if err != nil {
		return nil, err
	}
	return b.connect(ctx, id, st)
}

// connect builds the handle of a box from its state: the runner's URL is the
// Sandbox's service, its token is in the box's Secret.
func (b *Backend) connect(ctx context.Context, id string, st boxState) (*handle, error) {
	secretName := st.owner.GetAnnotations()[AnnotationRunnerSecret]
	secret, err := b.opts.Client.Resource(SecretResource).Namespace(b.opts.Namespace).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("box %s: read runner Secret %q: %w", id, secretName, err)
	}
	cfg, err := runnerConfigOf(secret)
	if err != nil {
		return nil, fmt.Errorf("box %s: %w", id, err)
	}
	url := fmt.Sprintf("http://%s:%d", st.serviceFQDN, b.opts.RunnerPort)
	return b.newHandle(id, runnerapi.NewHTTPClient(url, cfg.Token, nil)), nil
}

// List describes every box of this deployment: its cold Sandboxes and its
// SandboxClaims, oldest first. Warm pool Sandboxes not yet claimed are the
// pools', not listed.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + b.opts.Instance + "," + LabelBox}
	var ids []string
	for _, res := range []struct {
		name string
		list func() ([]string, error)
	}{
		{"Sandboxes", func() ([]string, error) { return b.names(ctx, SandboxResource.Resource, sel) }},
		{"SandboxClaims", func() ([]string, error) { return b.names(ctx, ClaimResource.Resource, sel) }},
	} {
		names, err := res.list()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", res.name, err)
		}
		ids = append(ids, names...)
	}
	out := make([]sandbox.Info, 0, len(ids))
	for _, id := range ids {
		st, err := b.observe(ctx, id)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (b *Backend) names(ctx context.Context, resource string, sel metav1.ListOptions) ([]string, error) {
	gvr := SandboxResource
	if resource == ClaimResource.Resource {
		gvr = ClaimResource
	}
	list, err := b.opts.Client.Resource(gvr).Namespace(b.opts.Namespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.GetName())
	}
	return out, nil
}

// Release deletes the box gracefully: the pod gets its termination grace period.
func (b *Backend) Release(ctx context.Context, id string) error {
	return b.delete(ctx, id, nil)
}

// Destroy deletes the box at once. An unknown box is not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	zero := int64(0)
	return b.delete(ctx, id, &zero)
}

func (b *Backend) delete(ctx context.Context, id string, grace *int64) error {
	st, err := b.observe(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	gvr := SandboxResource
	if st.owner.GetKind() == "SandboxClaim" {
		gvr = ClaimResource // the claim owns its Sandbox: the cluster deletes both
	}
	b.markDestroyed(id)
	policy := metav1.DeletePropagationBackground
	err = b.opts.Client.Resource(gvr).Namespace(b.opts.Namespace).Delete(ctx, id,
		metav1.DeleteOptions{GracePeriodSeconds: grace, PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", st.owner.GetKind(), id, err)
	}
	return nil
}

// Pause suspends the box's Sandbox (operatingMode Suspended): agent-sandbox
// deletes its pod and keeps the Sandbox, its Secret and its volumes. It returns
// once the Sandbox no longer reports Ready, so a Resume that follows waits for
// the new pod rather than the old one's last status. This is not a freeze;
// Capabilities says so.
func (b *Backend) Pause(ctx context.Context, id string) error {
	if err := b.setMode(ctx, id, "Suspended"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(b.opts.PollInterval)
	defer tick.Stop()
	for {
		st, err := b.observe(wctx, id)
		if err != nil {
			return err
		}
		if !st.ready {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("suspend box %s: its Sandbox still reports Ready: %w", id, wctx.Err())
		case <-tick.C:
		}
	}
}

// Resume runs a suspended box's Sandbox again and waits for its new runner.
func (b *Backend) Resume(ctx context.Context, id string) error {
	if err := b.setMode(ctx, id, "Running"); err != nil {
		return err
	}
	h, err := b.waitReady(ctx, id)
	if err != nil {
		return err
	}
	return h.Close()
}

func (b *Backend) setMode(ctx context.Context, id, mode string) error {
	st, err := b.observe(ctx, id)
	if err != nil {
		return err
	}
	if st.sb == nil {
		return fmt.Errorf("box %s has no Sandbox yet: %w", id, sandbox.ErrNotSupported)
	}
	patch := []byte(`{"spec":{"operatingMode":"` + mode + `"}}`)
	_, err = b.opts.Client.Resource(SandboxResource).Namespace(b.opts.Namespace).Patch(ctx, st.sandboxName,
		types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set Sandbox %s to %s: %w", st.sandboxName, mode, err)
	}
	return nil
}

// Watch reports the box's death: its Sandbox finished (runner or pod ended,
// expired) or deleted. The cluster is polled every PollInterval; a failed read
// is a lost connection, not a death.
func (b *Backend) Watch(ctx context.Context, id string) (<-chan sandbox.Death, error) {
	if _, err := b.observe(ctx, id); err != nil {
		return nil, err
	}
	out := make(chan sandbox.Death, 1)
	go func() {
		defer close(out)
		tick := time.NewTicker(b.opts.PollInterval)
		defer tick.Stop()
		for {
			st, err := b.observe(ctx, id)
			var d *sandbox.Death
			switch {
			case errors.Is(err, sandbox.ErrNotFound):
				d = &sandbox.Death{BoxID: id, Reason: "vanished", Message: "its Sandbox was deleted", At: time.Now().UTC()}
				if b.wasDestroyed(id) {
					d.Reason = "destroyed"
				}
			case err == nil && st.death != nil:
				d = st.death
				if d.Reason == "destroyed" && !b.wasDestroyed(id) {
					d.Reason = "vanished"
				}
			}
			if d != nil {
				out <- *d
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-b.done:
				return
			case <-tick.C:
			}
		}
	}()
	return out, nil
}

// Reap destroys every box of this deployment that keep does not claim. Warm
// pools' unclaimed Sandboxes are not this deployment's boxes and stay.
func (b *Backend) Reap(ctx context.Context, keep func(id string) bool) ([]string, error) {
	all, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, in := range all {
		if keep(in.ID) {
			continue
		}
		if err := b.Destroy(ctx, in.ID); err != nil {
			return gone, err
		}
		gone = append(gone, in.ID)
	}
	return gone, nil
}
