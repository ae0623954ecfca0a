package main

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/kubernetes"
)

// serviceAccountNamespace is where a pod learns its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// openKubernetesBackend builds the kubernetes sandbox backend from
// configuration: the pod's service account (or a kubeconfig), the boxes'
// namespace, templates and runner, and the model egress the boxes' sidecars
// serve. It does not reach the cluster yet.
func openKubernetesBackend(cfg *config.Config, log *zap.Logger) (*kubernetes.Backend, error) {
	kc := cfg.Sandbox.Kubernetes
	var rc *rest.Config
	var err error
	if kc.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kc.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox.kubernetes: cluster credentials: %w", err)
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("sandbox.kubernetes: API client: %w", err)
	}
	ns := kc.Namespace
	if ns == "" {
		raw, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return nil, fmt.Errorf("sandbox.kubernetes.namespace is empty and this process's namespace is unknown: %w", err)
		}
		ns = strings.TrimSpace(string(raw))
	}
	routes, err := modelEgress(cfg.Models)
	if err != nil {
		return nil, err
	}
	limits, err := cfg.Sandbox.Limits.Sandbox()
	if err != nil {
		return nil, err
	}
	size, err := sandbox.ParseBytes(kc.WorkspaceSize)
	if err != nil {
		return nil, fmt.Errorf("sandbox.kubernetes.workspace_size: %w", err)
	}
	return kubernetes.New(kubernetes.Options{Client: client, Namespace: ns, Instance: kc.Instance,
		Templates: kc.Templates, DefaultTemplate: kc.DefaultTemplate, BoxContainer: kc.BoxContainer,
		RunnerCommand: kc.RunnerCommand, RunnerPort: kc.RunnerPort, RunAsUser: kc.RunAsUser, Egress: routes,
		WorkspaceSize: size, StorageClass: kc.StorageClass, DefaultLimits: limits, ReadyTimeout: kc.ReadyTimeout,
		Logger: log.Named("sandbox")})
}
