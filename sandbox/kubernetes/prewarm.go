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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/astrabox/astrabox/sandbox"
)

// AnnotationServices holds a prewarm pool's resident services (JSON): a claimed
// box starts them, since agent-sandbox warms pods, not processes.
const AnnotationServices = "astrabox.dev/services"

// poolName is the SandboxWarmPool (and its SandboxTemplate and Secret) of a
// profile's prewarm pool.
func (b *Backend) poolName(profileKey string) string {
	return "astrabox-pool-" + shortHash(b.opts.Instance+"\x00"+profileKey)
}

// EnsurePrewarm implements sandbox.Prewarmer with an agent-sandbox warm pool: a
// SandboxTemplate derived from the profile's (the box pod as Create makes it,
// with a runner configuration shared by the pool's boxes), its Secret, and a
// SandboxWarmPool of size replicas. A pool that exists already, made by this
// or another worker of the deployment, is left as it is.
func (b *Backend) EnsurePrewarm(profileKey string, spec sandbox.Spec, size int) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec = spec.WithDefaults()
	spec.ProfileKey = profileKey
	if err := b.validate(spec); err != nil {
		return false, fmt.Errorf("prewarm profile %s: %w", profileKey, err)
	}
	if spec.Workspace.Kind == sandbox.WorkspacePersistent {
		return false, fmt.Errorf("prewarm profile %s: %w: a persistent workspace cannot be prewarmed", profileKey, sandbox.ErrInvalidSpec)
	}
	if size < 1 {
		return false, fmt.Errorf("prewarm profile %s: %w: pool size %d", profileKey, sandbox.ErrInvalidSpec, size)
	}
	name := b.poolName(profileKey)
	ns := b.opts.Namespace
	_, err := b.opts.Client.Resource(WarmPoolResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get SandboxWarmPool %s: %w", name, err)
	}
	tmplName, _ := b.templateFor(profileKey)
	base, err := b.opts.Client.Resource(TemplateResource).Namespace(ns).Get(ctx, tmplName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get SandboxTemplate %s: %w", tmplName, err)
	}
	labels := map[string]string{LabelManagedBy: b.opts.Instance, LabelPool: name}
	secretName := name + "-runner"
	secret, err := b.runnerSecret(secretName, labels, spec, newToken())
	if err != nil {
		return false, err
	}
	if _, err := b.opts.Client.Resource(SecretResource).Namespace(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create pool Secret %s: %w", secretName, err)
	}
	tmpl, err := b.poolTemplate(base, name, secretName, labels, spec)
	if err != nil {
		return false, err
	}
	if _, err := b.opts.Client.Resource(TemplateResource).Namespace(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create SandboxTemplate %s: %w", name, err)
	}
	services, err := json.Marshal(spec.Services)
	if err != nil {
		return false, fmt.Errorf("encode services: %w", err)
	}
	annotations := map[string]string{AnnotationProfile: profileKey, AnnotationRunnerSecret: secretName, AnnotationServices: string(services)}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": WarmPoolResource.GroupVersion().String(), "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": toAny(labels), "annotations": toAny(annotations)},
		"spec": map[string]any{"replicas": int64(size), "sandboxTemplateRef": map[string]any{"name": name},
			"updateStrategy": map[string]any{"type": "OnReplenish"}},
	}}
	if _, err := b.opts.Client.Resource(WarmPoolResource).Namespace(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("create SandboxWarmPool %s: %w", name, err)
	}
	b.log.Info("kubernetes sandbox: prewarm pool created", zap.String("pool", name), zap.String("profile", profileKey), zap.Int("size", size))
	return true, nil
}

// poolTemplate derives a pool's SandboxTemplate from the profile's: the same
// network policy, with the box pod Create would make.
func (b *Backend) poolTemplate(base *unstructured.Unstructured, name, secretName string, labels map[string]string, spec sandbox.Spec) (*unstructured.Unstructured, error) {
	basePod, err := podSpecOf(base)
	if err != nil {
		return nil, err
	}
	pod, err := b.boxPodSpec(basePod, secretName, spec, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	if err != nil {
		return nil, err
	}
	podTemplate, err := podTemplateObject(pod, map[string]string{LabelManagedBy: b.opts.Instance, LabelPool: name})
	if err != nil {
		return nil, err
	}
	tspec := map[string]any{"podTemplate": podTemplate, "service": true}
	for _, key := range []string{"networkPolicy", "networkPolicyManagement"} {
		if v, ok, _ := unstructured.NestedFieldCopy(base.Object, "spec", key); ok {
			tspec[key] = v
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": TemplateResource.GroupVersion().String(), "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": b.opts.Namespace, "labels": toAny(labels)},
		"spec":     tspec,
	}}, nil
}

// Claim hands out a warm box of the profile's pool through a SandboxClaim. It
// returns ErrNoWarmBox when the profile has no pool or none of its boxes is
// ready (a claim would then start a box cold, which Create does as well).
func (b *Backend) Claim(ctx context.Context, profileKey string) (sandbox.Handle, error) {
	name := b.poolName(profileKey)
	ns := b.opts.Namespace
	pool, err := b.opts.Client.Resource(WarmPoolResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, sandbox.ErrNoWarmBox
	}
	if err != nil {
		return nil, fmt.Errorf("get SandboxWarmPool %s: %w", name, err)
	}
	if ready, _, _ := unstructured.NestedInt64(pool.Object, "status", "readyReplicas"); ready < 1 {
		return nil, sandbox.ErrNoWarmBox
	}
	var services []sandbox.Service
	if raw := pool.GetAnnotations()[AnnotationServices]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &services); err != nil {
			return nil, fmt.Errorf("SandboxWarmPool %s: decode services: %w", name, err)
		}
	}
	id := newID("ab-")
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ClaimResource.GroupVersion().String(), "kind": "SandboxClaim",
		"metadata": map[string]any{"name": id, "namespace": ns,
			"labels":      map[string]any{LabelManagedBy: b.opts.Instance, LabelBox: id},
			"annotations": map[string]any{AnnotationProfile: profileKey, AnnotationRunnerSecret: pool.GetAnnotations()[AnnotationRunnerSecret]}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": name}},
	}}
	if _, err := b.opts.Client.Resource(ClaimResource).Namespace(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create SandboxClaim %s: %w", id, err)
	}
	h, err := b.waitReady(ctx, id)
	if err == nil {
		err = b.startServices(ctx, h, sandbox.Spec{Services: services})
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := b.Destroy(dctx, id); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return h, nil
}
