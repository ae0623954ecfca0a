package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// template is a SandboxTemplate as an operator writes it: an image with the
// runner and the Agent programs, and a network policy.
func template(name string) *unstructured.Unstructured {
	return templateWithImage(name, "registry.example/astrabox-box:1")
}

func templateWithImage(name, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": TemplateResource.GroupVersion().String(), "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": testNamespace},
		"spec": map[string]any{
			"podTemplate": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{
				"containers": []any{map[string]any{"name": "box", "image": image,
					"resources": map[string]any{"requests": map[string]any{"cpu": "250m"}}}},
			}},
			"networkPolicyManagement": "Managed",
			"networkPolicy": map[string]any{"egress": []any{map[string]any{
				"ports": []any{map[string]any{"port": int64(443), "protocol": "TCP"}}}}},
		},
	}}
}

func newBackend(t *testing.T, c *cluster, instance string) *Backend {
	t.Helper()
	b, err := New(Options{Client: c.client, Namespace: testNamespace, Instance: instance, DefaultTemplate: "agents",
		RunnerPort: c.port, PollInterval: 5 * time.Millisecond, ReadyTimeout: 30 * time.Second, Logger: testutil.Logger(t),
		Egress: map[string]egress.Route{"model": {Upstream: "https://model.example", Headers: map[string]string{"x-api-key": "real-secret"}}}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func boxSpec() sandbox.Spec {
	return sandbox.Spec{ProfileKey: "profile-1", Image: sandbox.Image{URI: "registry.example/claude-box:2"},
		Env:      map[string]string{"GREETING": "hello from the pod"},
		Limits:   sandbox.Limits{CPUMillis: 500, MemoryBytes: 1 << 30, TmpBytes: 64 << 20},
		Network:  sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 4000}, {Name: "tracing", Port: 4318, Upstream: "https://otel.example", Paths: []string{"/v1/traces"}}}},
		Metadata: map[string]string{"agent_id": "agent-7"}, Timeout: time.Hour}
}

func get(t *testing.T, c *cluster, gvr interface{ String() string }, name string) *unstructured.Unstructured {
	t.Helper()
	for res := range listKinds {
		if res.String() == gvr.String() {
			obj, err := c.client.Resource(res).Namespace(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			return obj
		}
	}
	t.Fatalf("unknown resource %s", gvr)
	return nil
}

func exec(t *testing.T, ctx context.Context, h sandbox.Handle, script string) string {
	t.Helper()
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", script}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	return strings.TrimSpace(string(res.Stdout))
}

func TestCreateMakesARestrictedSandboxAndDrivesItsRunnerThroughTheService(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")

	h, err := b.Create(ctx, boxSpec())
	require.NoError(t, err)
	defer h.Close()

	// The runner answers over TCP with the Secret's token, with the box's env.
	require.Equal(t, "hello from the pod", exec(t, ctx, h, `echo "$GREETING"`))
	st, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "p1", Argv: []string{"sh", "-c", "echo one; echo two"}})
	require.NoError(t, err)
	require.Equal(t, "p1", st.ID)
	out, err := h.ReadOutput(ctx, "p1", 0, true)
	require.NoError(t, err)
	var lines []string
	for {
		l, err := out.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		lines = append(lines, string(l.Data))
	}
	out.Close()
	require.Equal(t, []string{"one", "two"}, lines)
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, info.State)
	require.Equal(t, "profile-1", info.ProfileKey)
	require.Equal(t, map[string]string{"agent_id": "agent-7"}, info.Metadata)
	require.NotEmpty(t, info.BootID)

	// The pod is what a box must be, and the cluster ends it after its timeout.
	sb := get(t, c, SandboxResource, h.ID())
	shutdown, _, _ := unstructured.NestedString(sb.Object, "spec", "shutdownTime")
	at, err := time.Parse(time.RFC3339, shutdown)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute)
	pod, err := podSpecOf(sb)
	require.NoError(t, err)
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.False(t, *pod.AutomountServiceAccountToken)
	require.Len(t, pod.Containers, 1)
	require.Len(t, pod.InitContainers, 1)
	box, side := pod.Containers[0], pod.InitContainers[0]
	require.Equal(t, corev1.ContainerRestartPolicyAlways, *side.RestartPolicy, "a native sidecar ends with the pod")
	require.Equal(t, "registry.example/claude-box:2", box.Image)
	require.Equal(t, []string{"astrabox-runner", "serve", "-config", "/etc/astrabox/runner/runner.json"}, box.Command)
	require.Equal(t, "500m", box.Resources.Limits.Cpu().String())
	require.Equal(t, "1Gi", box.Resources.Limits.Memory().String())
	for _, ctr := range []corev1.Container{box, side} {
		sc := ctr.SecurityContext
		require.True(t, *sc.RunAsNonRoot && *sc.ReadOnlyRootFilesystem && !*sc.AllowPrivilegeEscalation, ctr.Name)
		require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	}
	require.Equal(t, egressContainer, side.Name)
	require.Equal(t, []string{"astrabox-runner", "egress", "-config", "/etc/astrabox/egress/forwarder.json"}, side.Command)
	mounts := func(ctr corev1.Container) map[string]string {
		m := map[string]string{}
		for _, vm := range ctr.VolumeMounts {
			m[vm.Name] = vm.MountPath
		}
		return m
	}
	require.NotContains(t, mounts(box), volEgressConfig, "the credential must stay out of the box container")
	require.Contains(t, mounts(side), volEgressConfig)

	// The Secret: the runner's config has no credential; the sidecar's has it.
	secret := get(t, c, SecretResource, h.ID()+"-runner")
	require.Equal(t, h.ID(), secret.GetOwnerReferences()[0].Name)
	rc, _, _ := unstructured.NestedString(secret.Object, "stringData", runnerConfigKey)
	ec, _, _ := unstructured.NestedString(secret.Object, "stringData", egressConfigKey)
	require.NotContains(t, rc, "real-secret")
	var fwd egress.ForwarderConfig
	require.NoError(t, json.Unmarshal([]byte(ec), &fwd))
	require.Equal(t, "real-secret", fwd.Routes["model"].Headers["x-api-key"])
	require.Equal(t, egress.Route{Upstream: "https://otel.example", Paths: []string{"/v1/traces"}}, fwd.Routes["tracing"])
	var cfg runnerapi.Config
	require.NoError(t, json.Unmarshal([]byte(rc), &cfg))
	require.Equal(t, []runnerapi.Forward{{Listen: "127.0.0.1:4000", Socket: "/run/egress/model.sock"},
		{Listen: "127.0.0.1:4318", Socket: "/run/egress/tracing.sock"}}, cfg.Forwards)

	require.NoError(t, b.Destroy(ctx, h.ID()))
	_, err = b.Get(ctx, h.ID())
	require.ErrorIs(t, err, sandbox.ErrNotFound)
	require.NoError(t, b.Destroy(ctx, h.ID()), "destroying an unknown box is not an error")
}

func TestAWorkerRestartListsDrivesAndReapsTheBoxesAnEarlierOneMade(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	first := newBackend(t, c, "astrabox")
	other := newBackend(t, c, "another-deployment")
	var ids []string
	for i := 0; i < 2; i++ {
		h, err := first.Create(ctx, boxSpec())
		require.NoError(t, err)
		ids = append(ids, h.ID())
		h.Close()
	}
	foreign, err := other.Create(ctx, boxSpec())
	require.NoError(t, err)
	defer foreign.Close()
	require.NoError(t, first.Close())

	// A new worker knows nothing but the cluster.
	second := newBackend(t, c, "astrabox")
	list, err := second.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, in := range list {
		require.Contains(t, ids, in.ID)
		require.Equal(t, sandbox.StateRunning, in.State)
		require.Equal(t, "profile-1", in.ProfileKey)
	}
	h, err := second.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, "hello from the pod", exec(t, ctx, h, `echo "$GREETING"`))
	h.Close()
	_, err = second.Get(ctx, foreign.ID())
	require.ErrorIs(t, err, sandbox.ErrNotFound, "another deployment's box is not ours")

	deaths, err := second.Watch(ctx, ids[1])
	require.NoError(t, err)
	gone, err := second.Reap(ctx, func(id string) bool { return id == ids[0] })
	require.NoError(t, err)
	require.Equal(t, []string{ids[1]}, gone)
	d := <-deaths
	require.Equal(t, "destroyed", d.Reason)
	list, err = second.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, second.Destroy(ctx, ids[0]))
	require.NoError(t, other.Destroy(ctx, foreign.ID()))
}

func TestARunnerThatEndsIsTheBoxsDeath(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")
	h, err := b.Create(ctx, sandbox.Spec{ProfileKey: "p"})
	require.NoError(t, err)
	defer h.Close()
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	c.exitRunner(t, h.ID())
	d := <-deaths
	require.Equal(t, "runner_exited", d.Reason)
	require.Equal(t, h.ID(), d.BoxID)
	_, err = h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
	require.ErrorIs(t, err, sandbox.ErrBoxLost)
	require.NoError(t, b.Destroy(ctx, h.ID()))
}

func TestPauseSuspendsTheSandboxAndResumeStartsANewRunner(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")
	require.False(t, b.Capabilities().Pause, "a suspension is not a freeze")
	h, err := b.Create(ctx, sandbox.Spec{ProfileKey: "p"})
	require.NoError(t, err)
	defer h.Close()
	before, err := h.Info(ctx)
	require.NoError(t, err)

	require.NoError(t, b.Pause(ctx, h.ID()))
	waitFor(t, ctx, func() bool {
		in, err := h.Info(ctx)
		return err == nil && in.State == sandbox.StatePaused
	})
	require.NoError(t, b.Resume(ctx, h.ID()))
	after, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, after.State)
	require.NotEqual(t, before.BootID, after.BootID)
	require.Equal(t, "ok", exec(t, ctx, h, "echo ok"))
	require.NoError(t, b.Destroy(ctx, h.ID()))
}

func TestWarmPoolsAreThePrewarmPools(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")
	_, err := b.Claim(ctx, "profile-1")
	require.ErrorIs(t, err, sandbox.ErrNoWarmBox)

	spec := boxSpec()
	spec.Services = []sandbox.Service{{Process: sandbox.ProcessSpec{ID: "resident", Argv: []string{"sleep", "600"}}}}
	made, err := b.EnsurePrewarm("profile-1", spec, 2)
	require.NoError(t, err)
	require.True(t, made)
	made, err = b.EnsurePrewarm("profile-1", spec, 2)
	require.NoError(t, err)
	require.False(t, made, "a pool that exists is left as it is")
	pool := get(t, c, WarmPoolResource, b.poolName("profile-1"))
	require.Equal(t, b.poolName("profile-1"), pool.Object["spec"].(map[string]any)["sandboxTemplateRef"].(map[string]any)["name"])
	derived := get(t, c, TemplateResource, b.poolName("profile-1"))
	require.Equal(t, "Managed", derived.Object["spec"].(map[string]any)["networkPolicyManagement"])

	waitFor(t, ctx, func() bool {
		p := get(t, c, WarmPoolResource, b.poolName("profile-1"))
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "readyReplicas")
		return n == 2
	})
	h, err := b.Claim(ctx, "profile-1")
	require.NoError(t, err)
	defer h.Close()
	require.Equal(t, "hello from the pod", exec(t, ctx, h, `echo "$GREETING"`))
	st, err := h.Process(ctx, "resident")
	require.NoError(t, err)
	require.True(t, st.Running, "a claimed box runs the pool's resident services")
	claim := get(t, c, ClaimResource, h.ID())
	require.Equal(t, "SandboxClaim", claim.GetKind())

	list, err := newBackend(t, c, "astrabox").List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "unclaimed warm boxes are the pool's")
	require.Equal(t, h.ID(), list[0].ID)
	require.Equal(t, "profile-1", list[0].ProfileKey)
	require.NoError(t, b.Destroy(ctx, h.ID()))
	waitFor(t, ctx, func() bool {
		_, err := b.Get(ctx, h.ID())
		return errors.Is(err, sandbox.ErrNotFound)
	})

	persistent := spec
	persistent.Workspace = sandbox.Workspace{Kind: sandbox.WorkspacePersistent, Volume: "ws1"}
	_, err = b.EnsurePrewarm("profile-2", persistent, 1)
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
}

func TestAPersistentWorkspaceIsAClaimNoBoxOwns(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")
	spec := sandbox.Spec{ProfileKey: "p", Workspace: sandbox.Workspace{Kind: sandbox.WorkspacePersistent, Volume: "Session_42.ws"},
		Limits: sandbox.Limits{WorkspaceBytes: 5 << 30}}
	h, err := b.Create(ctx, spec)
	require.NoError(t, err)
	defer h.Close()
	name := workspaceVolumeName("Session_42.ws")
	pvc := get(t, c, PVCResource, name)
	require.Empty(t, pvc.GetOwnerReferences())
	var typed corev1.PersistentVolumeClaim
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(pvc.Object, &typed))
	require.Equal(t, "5Gi", typed.Spec.Resources.Requests.Storage().String())
	pod, err := podSpecOf(get(t, c, SandboxResource, h.ID()))
	require.NoError(t, err)
	var claimName string
	for _, v := range pod.Volumes {
		if v.Name == volWorkspace && v.PersistentVolumeClaim != nil {
			claimName = v.PersistentVolumeClaim.ClaimName
		}
	}
	require.Equal(t, name, claimName)
	require.NoError(t, b.Destroy(ctx, h.ID()))
	get(t, c, PVCResource, name) // still there
}

func TestSpecsACLusterCannotRunAreRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"))
	b := newBackend(t, c, "astrabox")
	bad := map[string]sandbox.Spec{
		"host network":      {Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}},
		"host directory":    {Image: sandbox.Image{Root: "/srv/rootfs"}},
		"unknown forward":   {Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "db", Port: 5432}}}},
		"invalid base spec": {Workspace: sandbox.Workspace{Kind: "remote"}},
	}
	for name, spec := range bad {
		_, err := b.Create(ctx, spec)
		require.ErrorIs(t, err, sandbox.ErrInvalidSpec, name)
	}
	noDefault, err := New(Options{Client: c.client, Namespace: testNamespace, Templates: map[string]string{"known": "agents"}})
	require.NoError(t, err)
	_, err = noDefault.Create(ctx, sandbox.Spec{ProfileKey: "unknown"})
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
	list, err := c.client.Resource(SandboxResource).Namespace(testNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
	_, err = New(Options{Client: c.client, Namespace: testNamespace})
	require.Error(t, err, "a backend without a template is refused")
}

func TestTheRuntimeProfileNamesItsTemplate(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := newCluster(t, template("agents"), templateWithImage("gpu-agents", "registry.example/gpu-box:3"))
	b, err := New(Options{Client: c.client, Namespace: testNamespace, DefaultTemplate: "agents",
		Templates: map[string]string{"9f1c0a8e-profile": "gpu-agents"}, RunnerPort: c.port,
		PollInterval: 5 * time.Millisecond, ReadyTimeout: 30 * time.Second, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	defer b.Close()
	for profile, image := range map[string]string{
		"9F1C0A8E-PROFILE": "registry.example/gpu-box:3", // configuration lower-cases map keys
		"another":          "registry.example/astrabox-box:1",
	} {
		h, err := b.Create(ctx, sandbox.Spec{ProfileKey: profile})
		require.NoError(t, err)
		pod, err := podSpecOf(get(t, c, SandboxResource, h.ID()))
		require.NoError(t, err)
		require.Equal(t, image, pod.Containers[0].Image, profile)
		require.Empty(t, pod.InitContainers, "no forwards, no egress sidecar")
		require.NoError(t, b.Destroy(ctx, h.ID()))
		h.Close()
	}
}

// waitFor polls cond until it holds or the test's context ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met: %v", ctx.Err())
		case <-tick.C:
		}
	}
}
