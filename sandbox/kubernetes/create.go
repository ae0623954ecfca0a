package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/astrabox/astrabox/sandbox"
)

// validate checks a spec against what a cluster box can be.
func (b *Backend) validate(spec sandbox.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.Network.Mode == sandbox.NetworkHost {
		return fmt.Errorf("%w: a box on Kubernetes never shares the node's network (network mode host)", sandbox.ErrInvalidSpec)
	}
	if spec.Image.Root != "" {
		return fmt.Errorf("%w: a box on Kubernetes runs an image, not a host directory (%q)", sandbox.ErrInvalidSpec, spec.Image.Root)
	}
	for _, f := range spec.Network.Forwards {
		if _, ok := b.opts.Egress[f.Name]; !ok && f.Upstream == "" {
			return fmt.Errorf("%w: forward %q has no egress service configured for the cluster", sandbox.ErrInvalidSpec, f.Name)
		}
	}
	if _, err := b.templateFor(spec.ProfileKey); err != nil {
		return err
	}
	return nil
}

// Create makes a Sandbox from the profile's template and returns once its
// runner answers and its resident services are ready.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	spec = spec.WithDefaults()
	if err := b.validate(spec); err != nil {
		return nil, err
	}
	tmplName, _ := b.templateFor(spec.ProfileKey)
	tmpl, err := b.opts.Client.Resource(TemplateResource).Namespace(b.opts.Namespace).Get(ctx, tmplName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get SandboxTemplate %s: %w", tmplName, err)
	}
	base, err := podSpecOf(tmpl)
	if err != nil {
		return nil, err
	}
	workspace, err := b.workspaceVolume(ctx, spec)
	if err != nil {
		return nil, err
	}
	id := newID("ab-")
	secretName := id + "-runner"
	labels := map[string]string{LabelManagedBy: b.opts.Instance, LabelBox: id}
	pod, err := b.boxPodSpec(base, secretName, spec, workspace)
	if err != nil {
		return nil, err
	}
	podTemplate, err := podTemplateObject(pod, labels)
	if err != nil {
		return nil, err
	}
	annotations, err := boxAnnotations(spec, secretName)
	if err != nil {
		return nil, err
	}
	sbSpec := map[string]any{"podTemplate": podTemplate, "service": true, "operatingMode": "Running"}
	if spec.Timeout > 0 {
		sbSpec["shutdownTime"] = time.Now().Add(spec.Timeout).UTC().Format(time.RFC3339)
		sbSpec["shutdownPolicy"] = "Delete"
	}
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SandboxResource.GroupVersion().String(), "kind": "Sandbox",
		"metadata": map[string]any{"name": id, "namespace": b.opts.Namespace, "labels": toAny(labels),
			"annotations": toAny(annotations)},
		"spec": sbSpec,
	}}
	created, err := b.opts.Client.Resource(SandboxResource).Namespace(b.opts.Namespace).Create(ctx, sb, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Sandbox %s: %w", id, err)
	}
	fail := func(err error) (sandbox.Handle, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := b.Destroy(dctx, id); derr != nil {
			b.log.Warn("kubernetes sandbox: destroy a box that failed to start", zap.String("box", id), zap.Error(derr))
		}
		return nil, err
	}
	// The Secret belongs to the Sandbox, so the cluster deletes it with the box.
	secret, err := b.runnerSecret(secretName, labels, spec, newToken())
	if err != nil {
		return fail(err)
	}
	secret.SetOwnerReferences([]metav1.OwnerReference{ownerRef(created)})
	if _, err := b.opts.Client.Resource(SecretResource).Namespace(b.opts.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("create runner Secret of %s: %w", id, err))
	}
	h, err := b.waitReady(ctx, id)
	if err != nil {
		return fail(err)
	}
	if err := b.startServices(ctx, h, spec); err != nil {
		return fail(err)
	}
	b.log.Info("kubernetes sandbox: box ready", zap.String("box", id), zap.String("template", tmplName))
	return h, nil
}

func boxAnnotations(spec sandbox.Spec, secretName string) (map[string]string, error) {
	a := map[string]string{AnnotationProfile: spec.ProfileKey, AnnotationRunnerSecret: secretName}
	if len(spec.Metadata) > 0 {
		raw, err := json.Marshal(spec.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encode metadata: %w", err)
		}
		a[AnnotationMetadata] = string(raw)
	}
	return a, nil
}

func ownerRef(obj *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID()}
}

// workspaceVolume is an emptyDir for an ephemeral workspace, or the claim of a
// persistent one, made on first use and never owned by a box, so it outlives
// them all.
func (b *Backend) workspaceVolume(ctx context.Context, spec sandbox.Spec) (corev1.VolumeSource, error) {
	limits := spec.Limits.Or(b.opts.DefaultLimits)
	if spec.Workspace.Kind != sandbox.WorkspacePersistent {
		dir := &corev1.EmptyDirVolumeSource{}
		if limits.WorkspaceBytes > 0 {
			dir.SizeLimit = resource.NewQuantity(limits.WorkspaceBytes, resource.BinarySI)
		}
		return corev1.VolumeSource{EmptyDir: dir}, nil
	}
	name := workspaceVolumeName(spec.Workspace.Volume)
	size := limits.WorkspaceBytes
	if size == 0 {
		size = b.opts.WorkspaceSize
	}
	pvc := corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.opts.Namespace, Labels: map[string]string{LabelManagedBy: b.opts.Instance}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if b.opts.StorageClass != "" {
		pvc.Spec.StorageClassName = &b.opts.StorageClass
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pvc)
	if err != nil {
		return corev1.VolumeSource{}, fmt.Errorf("encode workspace claim: %w", err)
	}
	_, err = b.opts.Client.Resource(PVCResource).Namespace(b.opts.Namespace).Create(ctx, &unstructured.Unstructured{Object: raw}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return corev1.VolumeSource{}, fmt.Errorf("create workspace volume %s: %w", name, err)
	}
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}, nil
}

// waitReady waits until the box's Sandbox reports Ready with a service and its
// runner answers, within ReadyTimeout.
func (b *Backend) waitReady(ctx context.Context, id string) (*handle, error) {
	wctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(b.opts.PollInterval)
	defer tick.Stop()
	var last error
	for {
		st, err := b.observe(wctx, id)
		switch {
		case err != nil:
			last = err
		case st.death != nil:
			return nil, fmt.Errorf("box %s: %w (%s: %s)", id, sandbox.ErrBoxLost, st.death.Reason, st.death.Message)
		case !st.ready:
			last = fmt.Errorf("Sandbox %s is not Ready: %s", st.sandboxName, st.readyMessage)
		default:
			h, err := b.connect(wctx, id, st)
			if err == nil {
				if _, err = h.Client().Info(wctx); err == nil {
					return h, nil
				}
				h.Close()
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for box %s: %w (last: %v)", id, ctx.Err(), last)
		case <-wctx.Done():
			return nil, &sandbox.NotReadyError{Service: "runner", Port: b.opts.RunnerPort,
				Reason: fmt.Sprintf("box %s not ready within %s: %v", id, b.opts.ReadyTimeout, last)}
		case <-tick.C:
		}
	}
}

// startServices starts the spec's resident services and waits for their ports.
func (b *Backend) startServices(ctx context.Context, h *handle, spec sandbox.Spec) error {
	for _, svc := range spec.Services {
		if _, err := h.StartProcess(ctx, svc.Process); err != nil {
			return fmt.Errorf("start service %q: %w", svc.Process.ID, err)
		}
		if svc.ReadyPort > 0 {
			if err := b.waitServiceReady(ctx, h, svc); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitServiceReady waits until svc listens on its ready port, failing at once
// when it exits first. Nothing announces "a program started listening", so it
// polls.
func (b *Backend) waitServiceReady(ctx context.Context, h *handle, svc sandbox.Service) error {
	id, port := svc.Process.ID, svc.ReadyPort
	wctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.Client().DialPort(wctx, port)
		if err == nil {
			return conn.Close()
		}
		st, serr := h.Process(wctx, id)
		if serr == nil && st.Exit != nil {
			return &sandbox.NotReadyError{Service: id, Port: port, Reason: fmt.Sprintf("exited with code %d before listening", st.Exit.Code)}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for service %q on port %d: %w", id, port, ctx.Err())
		case <-wctx.Done():
			return &sandbox.NotReadyError{Service: id, Port: port, Reason: fmt.Sprintf("did not listen within %s: %v", b.opts.ReadyTimeout, err)}
		case <-tick.C:
		}
	}
}

var errNotOurs = errors.New("not a box of this deployment")
