package crdschema_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/crdschema"
)

func load(t *testing.T) *crdschema.Schemas {
	t.Helper()
	files, err := filepath.Glob("../../sandbox/kubernetes/testdata/crds/*.yaml")
	if err != nil || len(files) != 4 {
		t.Fatalf("CRD files: %v %v", files, err)
	}
	s, err := crdschema.Load(files...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemasRefuseWhatTheServerWouldNotStore(t *testing.T) {
	t.Parallel()
	s := load(t)
	good := func() map[string]any {
		return map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
			"metadata": map[string]any{"name": "pool-a", "namespace": "boxes"},
			"spec":     map[string]any{"replicas": int64(2), "sandboxTemplateRef": map[string]any{"name": "t"}},
		}
	}
	if err := s.Validate(good()); err != nil {
		t.Fatalf("valid pool refused: %v", err)
	}
	cases := map[string]func(map[string]any){
		"unknown field": func(o map[string]any) { o["spec"].(map[string]any)["replica"] = int64(1) },
		"wrong type":    func(o map[string]any) { o["spec"].(map[string]any)["replicas"] = "two" },
		"bad enum": func(o map[string]any) {
			o["spec"].(map[string]any)["updateStrategy"] = map[string]any{"type": "Sometimes"}
		},
		"bad name": func(o map[string]any) { o["metadata"].(map[string]any)["name"] = "Not_A_DNS_Name" },
	}
	for name, breakIt := range cases {
		o := good()
		breakIt(o)
		if err := s.Validate(o); err == nil {
			t.Errorf("%s: accepted %v", name, o)
		}
	}
	if err := s.Validate(map[string]any{"apiVersion": "v1", "kind": "Pod"}); err == nil ||
		!strings.Contains(err.Error(), "no CRD serves") {
		t.Errorf("unknown kind: %v", err)
	}
}
