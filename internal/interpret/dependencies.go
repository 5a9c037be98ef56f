package interpret

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Dependency is an object a workload needs beside it; an empty Namespace means the
// workload's own.
type Dependency struct {
	APIVersion, Kind, Namespace, Name string
}

// podSpecPath is where a kind keeps its pod spec.
func podSpecPath(kind string) []string {
	switch kind {
	case "Pod":
		return []string{"spec"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	return []string{"spec", "template", "spec"}
}

// PodDependencies lists the ConfigMaps, Secrets, ServiceAccount and PersistentVolumeClaims a
// workload's pod spec references, sorted and without duplicates. Kinds without a pod spec
// have none.
func PodDependencies(obj *unstructured.Unstructured) []Dependency {
	raw, found, _ := unstructured.NestedMap(obj.Object, podSpecPath(obj.GetKind())...)
	if !found {
		return nil
	}
	return podSpecDependencies(raw)
}

// podRequests is what one pod of the spec requests, init containers and overhead included.
func podRequests(rawSpec map[string]any) (corev1.ResourceList, error) {
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rawSpec, spec); err != nil {
		return nil, fmt.Errorf("pod spec: %w", err)
	}
	return resourcehelper.PodRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{}), nil
}

func podSpecDependencies(raw map[string]any) []Dependency {
	spec := &corev1.PodSpec{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(raw, spec) != nil {
		return nil
	}
	set := map[Dependency]bool{}
	add := func(kind, name string) {
		if name != "" {
			set[Dependency{APIVersion: "v1", Kind: kind, Name: name}] = true
		}
	}
	if spec.ServiceAccountName != "" && spec.ServiceAccountName != "default" {
		add("ServiceAccount", spec.ServiceAccountName)
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name)
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add("ConfigMap", v.ConfigMap.Name)
		}
		if v.Secret != nil {
			add("Secret", v.Secret.SecretName)
		}
		if v.PersistentVolumeClaim != nil {
			add("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add("ConfigMap", src.ConfigMap.Name)
				}
				if src.Secret != nil {
					add("Secret", src.Secret.Name)
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range containers {
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				add("ConfigMap", ef.ConfigMapRef.Name)
			}
			if ef.SecretRef != nil {
				add("Secret", ef.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add("Secret", e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	out := make([]Dependency, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
