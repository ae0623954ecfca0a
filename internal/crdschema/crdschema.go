// Package crdschema checks custom resources against the structural OpenAPI
// schemas of their CustomResourceDefinitions, the way the Kubernetes API server
// does before it stores one: fields the schema does not declare are refused
// (the server would prune them silently), and every value is validated
// (types, enums, patterns, required fields, ObjectMeta). Tests use it to prove
// that what the platform writes (the Kubernetes sandbox backend's objects, the
// Helm chart's custom resources) would be accepted as written.
package crdschema

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Schemas holds the validators of every served version of some CRDs.
type Schemas struct {
	kinds map[schema.GroupVersionKind]kindSchema
}

type kindSchema struct {
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
}

// Load reads CRD manifests (YAML) and prepares a validator per served version.
func Load(paths ...string) (*Schemas, error) {
	s := &Schemas{kinds: map[schema.GroupVersionKind]kindSchema{}}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read CRD: %w", err)
		}
		if err := s.add(raw); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", p, err)
		}
	}
	return s, nil
}

func (s *Schemas) add(raw []byte) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return fmt.Errorf("version %s: convert schema: %w", v.Name, err)
		}
		st, err := structuralschema.NewStructural(&internal)
		if err != nil {
			return fmt.Errorf("version %s: not a structural schema: %w", v.Name, err)
		}
		validator, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return fmt.Errorf("version %s: schema validator: %w", v.Name, err)
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		s.kinds[gvk] = kindSchema{structural: st, validator: validator}
	}
	return nil
}

// Knows reports whether a schema for gvk was loaded.
func (s *Schemas) Knows(gvk schema.GroupVersionKind) bool {
	_, ok := s.kinds[gvk]
	return ok
}

// ErrUnknownKind is returned for an object whose kind no loaded CRD serves.
var ErrUnknownKind = errors.New("crdschema: no CRD serves this kind")

// Validate checks one object (as decoded JSON: map[string]any) against its
// kind's schema. The object is not modified.
func (s *Schemas) Validate(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	ks, ok := s.kinds[gvk]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownKind, gvk)
	}
	copied := runtime.DeepCopyJSON(obj)
	unknown := pruning.PruneWithOptions(copied, ks.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	var errs field.ErrorList
	for _, p := range unknown {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: the schema does not declare it"))
	}
	errs = append(errs, objectmeta.Validate(context.Background(), nil, obj, ks.structural, true)...)
	errs = append(errs, validateRootMeta(obj)...)
	errs = append(errs, validation.ValidateCustomResource(nil, obj, ks.validator)...)
	if len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return fmt.Errorf("%s %s: %s", gvk.Kind, nameOf(obj), strings.Join(msgs, "; "))
	}
	return nil
}

// validateRootMeta applies the API server's rules for a custom resource's own
// name and namespace: a DNS subdomain and a DNS label.
func validateRootMeta(obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	for _, msg := range k8svalidation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		for _, msg := range k8svalidation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), ns, msg))
		}
	}
	return errs
}

func nameOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		name, _ = meta["generateName"].(string)
	}
	return name
}
