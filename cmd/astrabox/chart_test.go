package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/crdschema"
)

const chartDir = "../../deploy/helm/astrabox"

// rendered is the chart's output: every object, decoded strictly.
type rendered struct {
	objects map[string]any // "Kind/name" -> typed object
	custom  []map[string]any
}

// renderChart renders the chart as `helm template` does, with overrides, and
// decodes every object with the Kubernetes Go types, refusing unknown fields;
// custom resources are checked against their CRDs' schemas.
func renderChart(t *testing.T, overrides map[string]any) rendered {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	require.NoError(t, ch.Validate())
	if kube := chartutil.DefaultCapabilities.KubeVersion.Version; ch.Metadata.KubeVersion != "" {
		require.True(t, chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, kube),
			"the chart's kubeVersion %q refuses the Kubernetes %s `helm template` assumes", ch.Metadata.KubeVersion, kube)
	}
	vals, err := chartutil.ToRenderValues(ch, overrides,
		chartutil.ReleaseOptions{Name: "astrabox", Namespace: "astrabox", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	files, err := engine.Render(ch, vals)
	require.NoError(t, err)
	crds, err := filepath.Glob("../../sandbox/kubernetes/testdata/crds/*.yaml")
	require.NoError(t, err)
	schemas, err := crdschema.Load(crds...)
	require.NoError(t, err)

	out := rendered{objects: map[string]any{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, ".tpl") || strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &head), "%s", name)
			key := head.Kind + "/" + head.Metadata.Name
			if strings.Contains(head.APIVersion, "agents.x-k8s.io") {
				var obj map[string]any
				require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
				require.NoError(t, schemas.Validate(obj), "%s in %s", key, name)
				out.custom = append(out.custom, obj)
				continue
			}
			typed := typedFor(t, head.APIVersion, head.Kind)
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), typed), "%s in %s:\n%s", key, name, doc)
			require.NotContains(t, out.objects, key, "rendered twice")
			out.objects[key] = typed
		}
	}
	return out
}

func typedFor(t *testing.T, apiVersion, kind string) any {
	t.Helper()
	types := map[string]any{
		"apps/v1/Deployment":                       &appsv1.Deployment{},
		"batch/v1/Job":                             &batchv1.Job{},
		"v1/Service":                               &corev1.Service{},
		"v1/ServiceAccount":                        &corev1.ServiceAccount{},
		"v1/ConfigMap":                             &corev1.ConfigMap{},
		"v1/Secret":                                &corev1.Secret{},
		"policy/v1/PodDisruptionBudget":            &policyv1.PodDisruptionBudget{},
		"networking.k8s.io/v1/Ingress":             &networkingv1.Ingress{},
		"networking.k8s.io/v1/NetworkPolicy":       &networkingv1.NetworkPolicy{},
		"rbac.authorization.k8s.io/v1/Role":        &rbacv1.Role{},
		"rbac.authorization.k8s.io/v1/RoleBinding": &rbacv1.RoleBinding{},
	}
	typed, ok := types[apiVersion+"/"+kind]
	require.True(t, ok, "the chart renders %s %s, which the test does not know", apiVersion, kind)
	return typed
}

func (r rendered) get(t *testing.T, key string) any {
	t.Helper()
	obj, ok := r.objects[key]
	require.True(t, ok, "%s not rendered", key)
	return obj
}

// checkPod holds every platform pod to the same rules: each container runs
// an existing astrabox command, non-root, read-only, without privileges, with
// resources; configuration comes from the ConfigMap file and secrets from a
// Secret.
func checkPod(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	require.NotNil(t, pod.SecurityContext, what)
	require.True(t, pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot, what)
	require.NotZero(t, *pod.SecurityContext.RunAsUser, what)
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		require.NotNil(t, sc, what)
		require.True(t, *sc.ReadOnlyRootFilesystem, "%s: read-only root", what)
		require.True(t, *sc.RunAsNonRoot, "%s: non-root", what)
		require.False(t, *sc.AllowPrivilegeEscalation, what)
		require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, what)
		require.False(t, c.Resources.Requests.Cpu().IsZero(), "%s: cpu request", what)
		require.False(t, c.Resources.Requests.Memory().IsZero(), "%s: memory request", what)
		require.False(t, c.Resources.Limits.Memory().IsZero(), "%s: memory limit", what)
		require.Empty(t, c.Command, "%s: the image's entry point is astrabox", what)
		requireCommand(t, what, c.Args)
		var hasConfig bool
		for _, e := range c.Env {
			hasConfig = hasConfig || (e.Name == "ASTRABOX_CONFIG" && e.Value == "/etc/astrabox/config.yaml")
		}
		require.True(t, hasConfig, what)
		require.Len(t, c.EnvFrom, 1, what)
		require.NotNil(t, c.EnvFrom[0].SecretRef, what)
	}
}

// requireCommand checks that args name a command of the astrabox binary and
// that every flag they pass exists on it.
func requireCommand(t *testing.T, what string, args []string) {
	t.Helper()
	root := newRootCommand()
	cmd, rest, err := root.Find(args)
	require.NoError(t, err, "%s: astrabox %v", what, args)
	require.True(t, cmd != root, "%s: astrabox %v names no command", what, args)
	for _, a := range rest {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			require.NotNil(t, cmd.Flags().Lookup(name), "%s: astrabox %v has no flag --%s", what, args, name)
		}
	}
	require.Empty(t, cmd.Commands(), "%s: astrabox %v needs a subcommand", what, args)
}

func TestTheChartRendersValidObjectsThatKeepTheDeploymentRules(t *testing.T) {
	t.Parallel()
	r := renderChart(t, map[string]any{"secrets": map[string]any{
		"databasePassword": "pw", "secretsKey": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "anthropicApiKey": "sk-ant"}})

	api := r.get(t, "Deployment/astrabox-api").(*appsv1.Deployment)
	checkPod(t, "api", api.Spec.Template.Spec)
	ctr := api.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"serve"}, ctr.Args)
	require.Equal(t, "/readyz", ctr.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", ctr.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "http", ctr.ReadinessProbe.HTTPGet.Port.String())
	require.Equal(t, "/metrics", api.Spec.Template.Annotations["prometheus.io/path"])
	svc := r.get(t, "Service/astrabox-api").(*corev1.Service)
	require.Equal(t, api.Spec.Selector.MatchLabels, svc.Spec.Selector)
	pdb := r.get(t, "PodDisruptionBudget/astrabox-api").(*policyv1.PodDisruptionBudget)
	require.Equal(t, api.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)

	worker := r.get(t, "Deployment/astrabox-worker").(*appsv1.Deployment)
	checkPod(t, "worker", worker.Spec.Template.Spec)
	require.Equal(t, []string{"worker"}, worker.Spec.Template.Spec.Containers[0].Args)
	require.GreaterOrEqual(t, *worker.Spec.Template.Spec.TerminationGracePeriodSeconds, int64(120),
		"a stopping worker needs time to hand its Relays over")
	wctr := worker.Spec.Template.Spec.Containers[0]
	require.Equal(t, int32(9464), wctr.Ports[0].ContainerPort)
	require.Equal(t, "/readyz", wctr.ReadinessProbe.HTTPGet.Path, "the worker's probes answer beside its metrics")
	require.Equal(t, "/healthz", wctr.LivenessProbe.HTTPGet.Path)
	require.Equal(t, wctr.Ports[0].Name, wctr.LivenessProbe.HTTPGet.Port.String())
	require.Equal(t, "astrabox-worker", worker.Spec.Template.Spec.ServiceAccountName)
	r.get(t, "PodDisruptionBudget/astrabox-worker")

	job := r.get(t, "Job/astrabox-migrate").(*batchv1.Job)
	checkPod(t, "migrate", job.Spec.Template.Spec)
	require.Equal(t, []string{"migrate", "up"}, job.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	hookConfig := r.get(t, "ConfigMap/astrabox-migrate-config").(*corev1.ConfigMap)
	require.Equal(t, "pre-install,pre-upgrade", hookConfig.Annotations["helm.sh/hook"])
	require.Equal(t, "astrabox-migrate-secrets", job.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name)

	// The configuration the processes read is one the binary accepts, with the
	// Secret's variables.
	cm := r.get(t, "ConfigMap/astrabox-config").(*corev1.ConfigMap)
	require.Equal(t, hookConfig.Data, cm.Data)
	secret := r.get(t, "Secret/astrabox-secrets").(*corev1.Secret)
	var environ []string
	for k, v := range secret.StringData {
		environ = append(environ, k+"="+v)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o600))
	cfg, err := config.Load(config.Source{File: file, Environ: environ})
	require.NoError(t, err, "config.yaml:\n%s", cm.Data["config.yaml"])
	require.Equal(t, "kubernetes", cfg.Sandbox.Backend)
	require.Equal(t, ":8080", cfg.HTTP.Addr)
	require.Equal(t, "astrabox", cfg.Sandbox.Kubernetes.Namespace)
	require.Equal(t, "astrabox-box", cfg.Sandbox.Kubernetes.DefaultTemplate)
	require.Equal(t, "pw", cfg.Database.Password.Reveal())
	require.Equal(t, "sk-ant", cfg.Models.AnthropicAPIKey.Reveal())
	require.Equal(t, "json", cfg.Log.Format)

	// The worker may manage boxes; the API may only find them.
	workerRole := r.get(t, "Role/astrabox-worker").(*rbacv1.Role)
	require.True(t, allows(workerRole, "agents.x-k8s.io", "sandboxes", "create"))
	require.True(t, allows(workerRole, "extensions.agents.x-k8s.io", "sandboxclaims", "delete"))
	require.True(t, allows(workerRole, "extensions.agents.x-k8s.io", "sandboxwarmpools", "create"))
	require.True(t, allows(workerRole, "", "secrets", "create"))
	apiRole := r.get(t, "Role/astrabox-api").(*rbacv1.Role)
	require.True(t, allows(apiRole, "agents.x-k8s.io", "sandboxes", "get"))
	require.False(t, allows(apiRole, "agents.x-k8s.io", "sandboxes", "create"))
	binding := r.get(t, "RoleBinding/astrabox-worker").(*rbacv1.RoleBinding)
	require.Equal(t, "astrabox-worker", binding.Subjects[0].Name)

	// Boxes: in from the platform's pods on the runner port only; out to DNS
	// and the model service only, never the cluster's private ranges.
	np := r.get(t, "NetworkPolicy/astrabox-boxes").(*networkingv1.NetworkPolicy)
	require.Equal(t, map[string]string{"astrabox.dev/managed-by": "astrabox"}, np.Spec.PodSelector.MatchLabels)
	require.ElementsMatch(t, []networkingv1.PolicyType{"Ingress", "Egress"}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Ingress, 1)
	require.Equal(t, int32(7070), np.Spec.Ingress[0].Ports[0].Port.IntVal)
	var froms []string
	for _, f := range np.Spec.Ingress[0].From {
		froms = append(froms, f.PodSelector.MatchLabels["app.kubernetes.io/component"])
	}
	require.ElementsMatch(t, []string{"api", "worker"}, froms)
	require.Len(t, np.Spec.Egress, 2)
	model := np.Spec.Egress[1].To[0].IPBlock
	require.Equal(t, "0.0.0.0/0", model.CIDR)
	require.Subset(t, model.Except, []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"})

	// The default SandboxTemplate: the chart's policy governs its boxes.
	require.Len(t, r.custom, 1)
	spec := r.custom[0]["spec"].(map[string]any)
	require.Equal(t, "Unmanaged", spec["networkPolicyManagement"])
	labels := spec["podTemplate"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
	require.Equal(t, "astrabox", labels["astrabox.dev/managed-by"], "the NetworkPolicy selects the boxes by this label")

	_, hasIngress := r.objects["Ingress/astrabox"]
	require.False(t, hasIngress, "the Ingress is optional and off by default")
}

func allows(role *rbacv1.Role, group, resource, verb string) bool {
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == group && res == resource && v == verb {
						return true
					}
				}
			}
		}
	}
	return false
}

func TestTheChartsOptionsRenderValidObjects(t *testing.T) {
	t.Parallel()
	r := renderChart(t, map[string]any{
		"api": map[string]any{"ingress": map[string]any{"enabled": true, "className": "nginx", "host": "agents.example.org",
			"tls": []any{map[string]any{"secretName": "agents-tls", "hosts": []any{"agents.example.org"}}}}},
		"secrets":       map[string]any{"create": false, "existingSecret": "astrabox-prod"},
		"sandbox":       map[string]any{"namespace": "boxes", "template": map[string]any{"runtimeClassName": "gvisor"}},
		"worker":        map[string]any{"metricsPort": 9100},
		"networkPolicy": map[string]any{"modelPorts": []any{443, 8443}},
	})
	ing := r.get(t, "Ingress/astrabox").(*networkingv1.Ingress)
	require.Equal(t, "agents.example.org", ing.Spec.Rules[0].Host)
	require.Equal(t, "astrabox-api", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
	_, made := r.objects["Secret/astrabox-secrets"]
	require.False(t, made, "an existing Secret is used as it is")
	api := r.get(t, "Deployment/astrabox-api").(*appsv1.Deployment)
	require.Equal(t, "astrabox-prod", api.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name)
	job := r.get(t, "Job/astrabox-migrate").(*batchv1.Job)
	require.Equal(t, "astrabox-prod", job.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name)

	role := r.get(t, "Role/astrabox-worker").(*rbacv1.Role)
	require.Equal(t, "boxes", role.Namespace, "the backend's rights are in the boxes' namespace")
	np := r.get(t, "NetworkPolicy/astrabox-boxes").(*networkingv1.NetworkPolicy)
	require.Equal(t, "boxes", np.Namespace)
	require.Equal(t, "astrabox", np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	require.Len(t, np.Spec.Egress[1].Ports, 2)
	require.Equal(t, "gvisor", r.custom[0]["spec"].(map[string]any)["podTemplate"].(map[string]any)["spec"].(map[string]any)["runtimeClassName"])

	cm := r.get(t, "ConfigMap/astrabox-config").(*corev1.ConfigMap)
	require.Contains(t, cm.Data["config.yaml"], "listen: :9100", "a worker metrics port other than the default is configured")
}
