package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/astrabox/astrabox/internal/crdschema"
	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox/runner"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

const testNamespace = "boxes"

// cluster is a fake API server (client-go's fake dynamic client) that refuses
// what the real one would refuse (custom resources against the agent-sandbox
// CRDs, core objects decoded strictly), plus a simulated agent-sandbox
// controller and kubelet: for every Sandbox that should run it starts a real
// runner from the Sandbox's runner Secret, on its own loopback address that
// stands for the Sandbox's service, and marks the Sandbox Ready; it suspends,
// fills warm pools, binds claims, and marks a Sandbox Finished when its runner
// ends.
type cluster struct {
	t       *testing.T
	client  *dynamicfake.FakeDynamicClient
	schemas *crdschema.Schemas
	port    int
	// dir holds the pods' runner folders. It is made before the cluster's
	// clean-up is registered, so it is removed after every runner stopped
	// (clean-ups run last first); a folder made later by t.TempDir would be
	// removed while runners still write to it.
	dir string

	mu      sync.Mutex
	runners map[string]*simRunner // by Sandbox name
	nextIP  int
	addrs   map[string]string // by Sandbox name
	kick    chan struct{}
}

type simRunner struct {
	ip     string
	cancel context.CancelFunc
	done   chan struct{}
	client *runnerapi.Client
	exited bool
}

var listKinds = map[schema.GroupVersionResource]string{
	SandboxResource: "SandboxList", TemplateResource: "SandboxTemplateList", WarmPoolResource: "SandboxWarmPoolList",
	ClaimResource: "SandboxClaimList", SecretResource: "SecretList", PVCResource: "PersistentVolumeClaimList",
}

func loadSchemas(t testing.TB) *crdschema.Schemas {
	t.Helper()
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(files) != 4 {
		t.Fatalf("CRDs in testdata/crds: %v %v", files, err)
	}
	s, err := crdschema.Load(files...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newCluster starts the fake cluster with the given objects (templates).
func newCluster(t *testing.T, objects ...runtime.Object) *cluster {
	t.Helper()
	c := &cluster{t: t, schemas: loadSchemas(t), dir: t.TempDir(), runners: map[string]*simRunner{}, addrs: map[string]string{}, kick: make(chan struct{}, 1)}
	for _, o := range objects {
		if err := c.check(o.(*unstructured.Unstructured)); err != nil {
			t.Fatalf("seed object: %v", err)
		}
	}
	c.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...)
	c.client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		if err := c.check(obj); err != nil {
			c.t.Errorf("the backend wrote an object the API server would refuse: %v", err)
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		return false, nil, nil
	})
	c.port = freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go c.run(ctx, done)
	t.Cleanup(func() {
		cancel()
		<-done
		c.stopAll()
		c.checkEverything()
	})
	return c
}

// check validates an object as the API server would before storing it.
func (c *cluster) check(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	if c.schemas.Knows(gvk) {
		return c.schemas.Validate(obj.Object)
	}
	var typed any
	switch gvk.Kind {
	case "Secret":
		typed = &corev1.Secret{}
	case "PersistentVolumeClaim":
		typed = &corev1.PersistentVolumeClaim{}
	default:
		return fmt.Errorf("unexpected kind %s", gvk)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typed, true)
}

// checkEverything validates every object left in the cluster, also the ones
// changed by patches after they were created.
func (c *cluster) checkEverything() {
	for gvr := range listKinds {
		list, err := c.client.Resource(gvr).Namespace(testNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			c.t.Errorf("list %s: %v", gvr.Resource, err)
			continue
		}
		for i := range list.Items {
			obj := list.Items[i]
			if obj.GetKind() == "" {
				obj.SetGroupVersionKind(gvr.GroupVersion().WithKind(listKinds[gvr][:len(listKinds[gvr])-4]))
			}
			if err := c.check(&obj); err != nil {
				c.t.Errorf("stored object fails its schema: %v", err)
			}
		}
	}
}

func freePort(t testing.TB) int {
	port, err := freeport.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// run reconciles on every change of the watched resources.
func (c *cluster) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	var watches []watch.Interface
	for _, gvr := range []schema.GroupVersionResource{SandboxResource, ClaimResource, WarmPoolResource, SecretResource} {
		w, err := c.client.Resource(gvr).Namespace(testNamespace).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			c.t.Errorf("watch %s: %v", gvr.Resource, err)
			return
		}
		watches = append(watches, w)
		go func() {
			for range w.ResultChan() {
				c.poke()
			}
		}()
	}
	defer func() {
		for _, w := range watches {
			w.Stop()
		}
	}()
	for {
		c.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
	}
}

func (c *cluster) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *cluster) res(gvr schema.GroupVersionResource) interface {
	List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
	Delete(context.Context, string, metav1.DeleteOptions, ...string) error
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
} {
	return c.client.Resource(gvr).Namespace(testNamespace)
}

func (c *cluster) reconcile(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	c.fillPools(ctx)
	c.bindClaims(ctx)
	sandboxes, err := c.res(SandboxResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	alive := map[string]bool{}
	for _, sb := range sandboxes.Items {
		alive[sb.GetName()] = true
		c.reconcileSandbox(ctx, &sb)
	}
	c.mu.Lock()
	var gone []string
	for name := range c.runners {
		if !alive[name] {
			gone = append(gone, name)
		}
	}
	c.mu.Unlock()
	for _, name := range gone {
		c.stopRunner(name) // the pod of a deleted Sandbox ends
	}
}

func (c *cluster) reconcileSandbox(ctx context.Context, sb *unstructured.Unstructured) {
	name := sb.GetName()
	mode, _, _ := unstructured.NestedString(sb.Object, "spec", "operatingMode")
	c.mu.Lock()
	r := c.runners[name]
	c.mu.Unlock()
	if mode == "Suspended" {
		if r != nil {
			c.stopRunner(name)
		}
		c.setStatus(ctx, name, "", "False", "SandboxSuspended", "")
		return
	}
	if r != nil {
		if r.exited && !finished(sb) {
			c.setStatus(ctx, name, r.ip, "False", "DependenciesNotReady", "PodSucceeded")
		}
		return
	}
	if finished(sb) {
		return
	}
	r, err := c.startRunner(ctx, sb)
	if err != nil {
		return // the Secret is not there yet: the kubelet would wait too
	}
	c.setStatus(ctx, name, r.ip, "True", "DependenciesReady", "")
}

func finished(sb *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(sb.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Finished" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// setStatus patches the Sandbox's status: Ready, and Finished when reason is set.
func (c *cluster) setStatus(ctx context.Context, name, ip, ready, reason, finishedReason string) {
	now := time.Now().UTC().Format(time.RFC3339)
	conds := []any{map[string]any{"type": "Ready", "status": ready, "reason": reason, "message": "simulated",
		"lastTransitionTime": now}}
	if finishedReason != "" {
		conds = append(conds, map[string]any{"type": "Finished", "status": "True", "reason": finishedReason,
			"message": "the runner exited", "lastTransitionTime": now})
	}
	status := map[string]any{"conditions": conds, "serviceFQDN": ip, "service": name}
	if ip == "" {
		status["serviceFQDN"] = nil
	}
	patch, _ := runtimeJSON(map[string]any{"status": status})
	_, _ = c.res(SandboxResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
}

// startRunner plays the pod: a real runner with the configuration the Secret
// mounted into the box container holds, its folders moved to a temporary
// directory, serving TCP on the Sandbox's own address.
func (c *cluster) startRunner(ctx context.Context, sb *unstructured.Unstructured) (*simRunner, error) {
	pod, err := podSpecOf(sb)
	if err != nil {
		return nil, err
	}
	secretName := ""
	for _, v := range pod.Volumes {
		if v.Name == volRunnerConfig && v.Secret != nil {
			secretName = v.Secret.SecretName
		}
	}
	secret, err := c.res(SecretResource).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cfg, err := runnerConfigOf(secret)
	if err != nil {
		c.t.Errorf("runner Secret of %s: %v", sb.GetName(), err)
		return nil, err
	}
	dir, err := os.MkdirTemp(c.dir, "pod-")
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, err
	}
	// A Sandbox's service keeps its name across pods, so its address here is
	// kept per Sandbox too.
	c.mu.Lock()
	ip, ok := c.addrs[sb.GetName()]
	if !ok {
		c.nextIP++
		ip = "127.0.77." + strconv.Itoa(c.nextIP)
		c.addrs[sb.GetName()] = ip
	}
	c.mu.Unlock()
	cfg.StateDir, cfg.Socket, cfg.Workspace = dir, filepath.Join(dir, "runner.sock"), ws
	cfg.ListenTCP = net.JoinHostPort(ip, strconv.Itoa(c.port))
	cfg.Forwards = nil // the egress sidecar is not simulated
	rn, err := runner.New(cfg, log.New(io.Discard, "", 0))
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	r := &simRunner{ip: ip, cancel: cancel, done: make(chan struct{}),
		client: runnerapi.NewHTTPClient("http://"+cfg.ListenTCP, cfg.Token, nil)}
	go func() {
		defer close(r.done)
		if err := rn.Serve(rctx, func() { close(ready) }); err != nil {
			c.t.Logf("sim runner %s: %v", sb.GetName(), err)
		}
		c.mu.Lock()
		r.exited = true
		c.mu.Unlock()
		c.poke()
	}()
	select {
	case <-ready:
	case <-r.done:
		return nil, fmt.Errorf("runner of %s ended before serving", sb.GetName())
	}
	c.mu.Lock()
	c.runners[sb.GetName()] = r
	c.mu.Unlock()
	return r, nil
}

// stopRunner ends a pod: every process of the runner, then the runner.
func (c *cluster) stopRunner(name string) {
	c.mu.Lock()
	r := c.runners[name]
	delete(c.runners, name)
	c.mu.Unlock()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.client.Shutdown(ctx, time.Second)
	select {
	case <-r.done:
	case <-ctx.Done():
		r.cancel()
		<-r.done
	}
	r.cancel()
	r.client.Close()
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	var names []string
	for n := range c.runners {
		names = append(names, n)
	}
	c.mu.Unlock()
	for _, n := range names {
		c.stopRunner(n)
	}
}

// exitRunner ends a box's runner as if its program ended the box.
func (c *cluster) exitRunner(t *testing.T, sandboxName string) {
	c.mu.Lock()
	r := c.runners[sandboxName]
	c.mu.Unlock()
	if r == nil {
		t.Fatalf("no runner for %s", sandboxName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.client.Shutdown(ctx, time.Second); err != nil {
		t.Fatalf("shut down runner: %v", err)
	}
}

// fillPools makes each warm pool's missing Sandboxes from its template, and
// reports how many of its unclaimed ones are Ready.
func (c *cluster) fillPools(ctx context.Context) {
	pools, err := c.res(WarmPoolResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pool := range pools.Items {
		name := pool.GetName()
		want, _, _ := unstructured.NestedInt64(pool.Object, "spec", "replicas")
		tmplName, _, _ := unstructured.NestedString(pool.Object, "spec", "sandboxTemplateRef", "name")
		members, err := c.res(SandboxResource).List(ctx, metav1.ListOptions{LabelSelector: warmLabel + "=" + name})
		if err != nil {
			continue
		}
		var ready int64
		for _, m := range members.Items {
			if isReady(&m) {
				ready++
			}
		}
		for have := int64(len(members.Items)); have < want; have++ {
			tmpl, err := c.res(TemplateResource).Get(ctx, tmplName, metav1.GetOptions{})
			if err != nil {
				break
			}
			podTemplate, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
			sb := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": SandboxResource.GroupVersion().String(), "kind": "Sandbox",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), "namespace": testNamespace,
					"labels": map[string]any{warmLabel: name}},
				"spec": map[string]any{"podTemplate": podTemplate, "service": true},
			}}
			if _, err := c.res(SandboxResource).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
				c.t.Errorf("warm Sandbox: %v", err)
			}
		}
		patch, _ := runtimeJSON(map[string]any{"status": map[string]any{"replicas": int64(len(members.Items)), "readyReplicas": ready}})
		_, _ = c.res(WarmPoolResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	}
}

// warmLabel marks a pool's unclaimed Sandboxes (agent-sandbox's own label).
const warmLabel = "agents.x-k8s.io/warm-pool-sandbox"

func isReady(sb *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(sb.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// bindClaims gives each unbound claim a Ready Sandbox of its pool (adopting it:
// the warm label goes, the claim owns it), and deletes the Sandboxes of claims
// that are gone, as the garbage collector would.
func (c *cluster) bindClaims(ctx context.Context) {
	claims, err := c.res(ClaimResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, claim := range claims.Items {
		live[claim.GetName()] = true
		if n, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name"); n != "" {
			continue
		}
		pool, _, _ := unstructured.NestedString(claim.Object, "spec", "warmPoolRef", "name")
		members, err := c.res(SandboxResource).List(ctx, metav1.ListOptions{LabelSelector: warmLabel + "=" + pool})
		if err != nil {
			continue
		}
		for _, m := range members.Items {
			if !isReady(&m) {
				continue
			}
			adopt, _ := runtimeJSON(map[string]any{"metadata": map[string]any{
				"labels": map[string]any{warmLabel: nil, claimLabel: claim.GetName()}}})
			if _, err := c.res(SandboxResource).Patch(ctx, m.GetName(), types.MergePatchType, adopt, metav1.PatchOptions{}); err != nil {
				continue
			}
			bound, _ := runtimeJSON(map[string]any{"status": map[string]any{"sandbox": map[string]any{"name": m.GetName()}}})
			_, _ = c.res(ClaimResource).Patch(ctx, claim.GetName(), types.MergePatchType, bound, metav1.PatchOptions{}, "status")
			break
		}
	}
	owned, err := c.res(SandboxResource).List(ctx, metav1.ListOptions{LabelSelector: claimLabel})
	if err != nil {
		return
	}
	for _, sb := range owned.Items {
		if !live[sb.GetLabels()[claimLabel]] {
			_ = c.res(SandboxResource).Delete(ctx, sb.GetName(), metav1.DeleteOptions{})
		}
	}
}

// claimLabel stands for the claim's ownership of its Sandbox (the fake has no
// garbage collector).
const claimLabel = "test.astrabox.dev/claim"

func runtimeJSON(v any) ([]byte, error) { return json.Marshal(v) }
