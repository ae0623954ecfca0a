package kubernetes

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// Paths inside the box's pod. The runner's configuration and the egress
// configuration are two keys of one Secret, each mounted only into the
// container that reads it.
const (
	runnerConfigDir  = "/etc/astrabox/runner"
	egressConfigDir  = "/etc/astrabox/egress"
	runnerConfigKey  = "runner.json"
	egressConfigKey  = "forwarder.json"
	egressContainer  = "astrabox-egress"
	volControl       = "astrabox-control"
	volEgress        = "astrabox-egress-sockets"
	volRunnerConfig  = "astrabox-runner-config"
	volEgressConfig  = "astrabox-egress-config"
	volWorkspace     = "astrabox-workspace"
	volTmp           = "astrabox-tmp"
	secretTypeOpaque = "Opaque"
)

// newID returns a fresh DNS-label box id.
func newID(prefix string) string {
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	return prefix + hex.EncodeToString(raw[:])
}

// newToken returns a runner bearer token.
func newToken() string {
	var raw [24]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// shortHash names objects derived from free-form keys (profile keys, volume
// names) in DNS-label form.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}

// runnerConfig is the runner's boot configuration for spec: TCP with token, the
// box's environment and its forwards to the egress sidecar's sockets.
func (b *Backend) runnerConfig(spec sandbox.Spec, token string) runnerapi.Config {
	env := map[string]string{"HOME": spec.Identity.Home, "USER": spec.Identity.Account}
	for k, v := range spec.Env {
		env[k] = v
	}
	cfg := runnerapi.Config{StateDir: runnerapi.ControlDir, Workspace: spec.Workspace.MountPath, Env: env,
		ListenTCP: ":" + strconv.Itoa(b.opts.RunnerPort), Token: token}
	for _, f := range spec.Network.Forwards {
		cfg.Forwards = append(cfg.Forwards, runnerapi.Forward{Listen: "127.0.0.1:" + strconv.Itoa(f.Port),
			Socket: path.Join(runnerapi.EgressDir, f.Name+".sock")})
	}
	return cfg
}

// egressConfig is what the sidecar serves, or false without forwards.
func (b *Backend) egressConfig(spec sandbox.Spec) (egress.ForwarderConfig, bool) {
	if len(spec.Network.Forwards) == 0 {
		return egress.ForwarderConfig{}, false
	}
	routes := map[string]egress.Route{}
	for _, f := range spec.Network.Forwards {
		if f.Upstream != "" {
			routes[f.Name] = egress.Route{Upstream: f.Upstream, Paths: f.Paths}
		} else {
			routes[f.Name] = b.opts.Egress[f.Name]
		}
	}
	uid := int(b.opts.RunAsUser)
	return egress.ForwarderConfig{Dir: runnerapi.EgressDir, UID: uid, GID: uid, Routes: routes}, true
}

// runnerSecret holds the runner's configuration (with its token) and the
// sidecar's egress configuration (with the credentials).
func (b *Backend) runnerSecret(name string, labels map[string]string, spec sandbox.Spec, token string) (*unstructured.Unstructured, error) {
	rc, err := json.Marshal(b.runnerConfig(spec, token))
	if err != nil {
		return nil, fmt.Errorf("encode runner config: %w", err)
	}
	data := map[string]any{runnerConfigKey: string(rc)}
	if ec, ok := b.egressConfig(spec); ok {
		raw, err := json.Marshal(ec)
		if err != nil {
			return nil, fmt.Errorf("encode egress config: %w", err)
		}
		data[egressConfigKey] = string(raw)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": secretTypeOpaque,
		"metadata":   map[string]any{"name": name, "namespace": b.opts.Namespace, "labels": toAny(labels)},
		"stringData": data,
	}}, nil
}

// boxPodSpec shapes a template's pod spec into a box: the runner as the box
// container's command with its configuration mounted, a read-only root with
// writable control, workspace and /tmp folders, a non-root account without
// privileges, the spec's image and limits, the egress sidecar when the box has
// forwards, and no restarts (a runner that exits ends the box).
func (b *Backend) boxPodSpec(base corev1.PodSpec, secretName string, spec sandbox.Spec, workspace corev1.VolumeSource) (corev1.PodSpec, error) {
	pod := *base.DeepCopy()
	idx := 0
	if b.opts.BoxContainer != "" {
		idx = -1
		for i, c := range pod.Containers {
			if c.Name == b.opts.BoxContainer {
				idx = i
			}
		}
	}
	if idx < 0 || len(pod.Containers) == 0 {
		return pod, fmt.Errorf("%w: the SandboxTemplate has no container %q", sandbox.ErrInvalidSpec, b.opts.BoxContainer)
	}
	box := &pod.Containers[idx]
	if spec.Image.URI != "" {
		box.Image = spec.Image.URI
	}
	box.Command = append(append([]string{}, b.opts.RunnerCommand...), "serve", "-config", path.Join(runnerConfigDir, runnerConfigKey))
	box.Args = nil
	box.WorkingDir = spec.Workspace.MountPath
	box.SecurityContext = b.restricted(box.SecurityContext)
	box.Ports = appendPort(box.Ports, corev1.ContainerPort{Name: "runner", ContainerPort: int32(b.opts.RunnerPort), Protocol: corev1.ProtocolTCP})
	box.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
		Port: intOrString(b.opts.RunnerPort)}}, PeriodSeconds: 2}
	limits := spec.Limits.Or(b.opts.DefaultLimits)
	box.Resources = containerResources(box.Resources, limits)
	box.VolumeMounts = append(box.VolumeMounts,
		corev1.VolumeMount{Name: volControl, MountPath: runnerapi.ControlDir},
		corev1.VolumeMount{Name: volRunnerConfig, MountPath: runnerConfigDir, ReadOnly: true},
		corev1.VolumeMount{Name: volWorkspace, MountPath: spec.Workspace.MountPath},
		corev1.VolumeMount{Name: volTmp, MountPath: "/tmp"})
	tmp := &corev1.EmptyDirVolumeSource{}
	if limits.TmpBytes > 0 {
		tmp.SizeLimit = resource.NewQuantity(limits.TmpBytes, resource.BinarySI)
	}
	pod.Volumes = append(pod.Volumes,
		corev1.Volume{Name: volControl, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volRunnerConfig, VolumeSource: secretVolume(secretName, runnerConfigKey)},
		corev1.Volume{Name: volWorkspace, VolumeSource: workspace},
		corev1.Volume{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: tmp}})
	if _, ok := b.egressConfig(spec); ok {
		box.VolumeMounts = append(box.VolumeMounts, corev1.VolumeMount{Name: volEgress, MountPath: runnerapi.EgressDir, ReadOnly: true})
		pod.Volumes = append(pod.Volumes,
			corev1.Volume{Name: volEgress, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			corev1.Volume{Name: volEgressConfig, VolumeSource: secretVolume(secretName, egressConfigKey)})
		// A native sidecar (an init container that keeps running): it serves
		// before the runner starts, and ends with the pod once the runner has
		// exited, so a finished box's pod completes.
		always := corev1.ContainerRestartPolicyAlways
		pod.InitContainers = append(pod.InitContainers, corev1.Container{
			Name:            egressContainer,
			RestartPolicy:   &always,
			Image:           box.Image,
			ImagePullPolicy: box.ImagePullPolicy,
			Command: append(append([]string{}, b.opts.RunnerCommand...), "egress", "-config",
				path.Join(egressConfigDir, egressConfigKey)),
			SecurityContext: b.restricted(nil),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: volEgress, MountPath: runnerapi.EgressDir},
				{Name: volEgressConfig, MountPath: egressConfigDir, ReadOnly: true},
			},
		})
	}
	pod.RestartPolicy = corev1.RestartPolicyNever
	automount := false
	pod.AutomountServiceAccountToken = &automount
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod.SecurityContext.FSGroup = &b.opts.RunAsUser
	return pod, nil
}

// restricted is a container security context no box may loosen: its own
// non-root account, no privilege escalation, no capabilities, a read-only root.
func (b *Backend) restricted(sc *corev1.SecurityContext) *corev1.SecurityContext {
	out := &corev1.SecurityContext{}
	if sc != nil {
		out = sc.DeepCopy()
	}
	yes, no := true, false
	uid := b.opts.RunAsUser
	out.RunAsUser, out.RunAsGroup, out.RunAsNonRoot = &uid, &uid, &yes
	out.AllowPrivilegeEscalation, out.Privileged, out.ReadOnlyRootFilesystem = &no, &no, &yes
	out.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if out.SeccompProfile == nil {
		out.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return out
}

// containerResources sets the box's limits as both request and limit, so what
// a box is promised is what it may use.
func containerResources(base corev1.ResourceRequirements, l sandbox.Limits) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	set := func(name corev1.ResourceName, q *resource.Quantity) {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Limits[name], out.Requests[name] = *q, *q
	}
	if l.CPUMillis > 0 {
		set(corev1.ResourceCPU, resource.NewMilliQuantity(l.CPUMillis, resource.DecimalSI))
	}
	if l.MemoryBytes > 0 {
		set(corev1.ResourceMemory, resource.NewQuantity(l.MemoryBytes, resource.BinarySI))
	}
	return out
}

func secretVolume(name, key string) corev1.VolumeSource {
	mode := int32(0o400)
	return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: &mode,
		Items: []corev1.KeyToPath{{Key: key, Path: key}}}}
}

func appendPort(ports []corev1.ContainerPort, p corev1.ContainerPort) []corev1.ContainerPort {
	for _, have := range ports {
		if have.ContainerPort == p.ContainerPort {
			return ports
		}
	}
	return append(ports, p)
}

// podTemplateObject is the agent-sandbox podTemplate {spec, metadata} of a box.
func podTemplateObject(pod corev1.PodSpec, labels map[string]string) (map[string]any, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod spec: %w", err)
	}
	return map[string]any{"spec": raw, "metadata": map[string]any{"labels": toAny(labels)}}, nil
}

// podSpecOf reads the pod spec of a SandboxTemplate (or Sandbox).
func podSpecOf(obj *unstructured.Unstructured) (corev1.PodSpec, error) {
	var pod corev1.PodSpec
	raw, found, err := unstructured.NestedMap(obj.Object, "spec", "podTemplate", "spec")
	if err != nil || !found {
		return pod, fmt.Errorf("%s %s has no spec.podTemplate.spec", obj.GetKind(), obj.GetName())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &pod, true); err != nil {
		return pod, fmt.Errorf("decode pod spec of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return pod, nil
}

// workspaceVolumeName is the PVC of a persistent workspace volume.
func workspaceVolumeName(volume string) string {
	clean := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, volume), "-")
	if len(clean) > 40 {
		clean = clean[:40]
	}
	return "astrabox-ws-" + clean + "-" + shortHash(volume)
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }
