// Package render turns a template into the manifest one member cluster receives: the template
// without control-plane-only fields, with the cluster's replica share written through the
// interpreter and Flotilla's ownership marks added. Overrides will be applied here, after the
// replica share, in a documented order. It also holds the checks of what a rendered manifest
// may be: overrides never change its identity (CheckIdentity), and a namespace's workloads meet
// a Pod Security level (CheckPodSecurity, the Pod Security admission library's own checks).
//
// It is pure: no API calls, no decisions about where or when.
package render

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
)

// Target says for whom a manifest is rendered.
type Target struct {
	// Replicas is the cluster's share; used when HasReplicas.
	Replicas    int32
	HasReplicas bool
	// WorkNamespace and WorkName identify the Work the manifest travels in.
	WorkNamespace, WorkName string
}

// controlPlaneAnnotations are written by control-plane controllers and mean nothing in a member.
var controlPlaneAnnotations = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"deployment.kubernetes.io/revision",
}

// Render returns the manifest of template for one member.
func Render(template *unstructured.Unstructured, interp interpret.Interpreter, t Target) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": template.GetAPIVersion(),
		"kind":       template.GetKind(),
	}}
	for k, v := range template.Object {
		switch k {
		case "metadata", "status", "apiVersion", "kind":
			continue
		}
		out.Object[k] = runtimeDeepCopy(v)
	}
	out.SetName(template.GetName())
	out.SetNamespace(template.GetNamespace())
	labels := template.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[workv1alpha1.ManagedByLabel] = workv1alpha1.ManagedByValue
	out.SetLabels(labels)
	annotations := workv1alpha1.WithoutSwitches(template.GetAnnotations())
	for _, a := range controlPlaneAnnotations {
		delete(annotations, a)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[workv1alpha1.WorkNamespaceAnnotation] = t.WorkNamespace
	annotations[workv1alpha1.WorkNameAnnotation] = t.WorkName
	out.SetAnnotations(annotations)

	switch template.GroupVersionKind().GroupKind().String() {
	case "Service":
		// The member allocates its own cluster IPs.
		if ip, _, _ := unstructured.NestedString(out.Object, "spec", "clusterIP"); ip != "None" {
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIPs")
		}
		unstructured.RemoveNestedField(out.Object, "spec", "healthCheckNodePort")
	case "Job.batch":
		// The control plane generated a selector bound to its own uid; the member makes its own.
		unstructured.RemoveNestedField(out.Object, "spec", "selector")
		for _, l := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
			unstructured.RemoveNestedField(out.Object, "spec", "template", "metadata", "labels", l)
		}
	}
	if t.HasReplicas {
		if err := interp.ReviseReplica(out, t.Replicas); err != nil {
			return nil, fmt.Errorf("setting replicas of %s %s/%s: %w", template.GetKind(), template.GetNamespace(), template.GetName(), err)
		}
	}
	return out, nil
}

func runtimeDeepCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// CanaryRoleLabel marks a canary's objects and pods, so a canary Service can select them.
const CanaryRoleLabel = "rollout.flotilla.dev/role"

// Role labels a rendered Deployment's pods (not its selector, which cannot change) with
// their role, so a Service can select the primary's pods apart from the canary's. Other kinds
// are left alone.
func Role(m *unstructured.Unstructured, role string) error {
	if m.GetKind() != "Deployment" {
		return nil
	}
	return unstructured.SetNestedField(m.Object, role, "spec", "template", "metadata", "labels", CanaryRoleLabel)
}

// CanaryName is the name of a workload's canary beside it.
func CanaryName(name string) string { return name + "-canary" }

// Canary turns a rendered Deployment into its canary: its own name, and the role label on the
// object, its selector and its pods, so the canary's ReplicaSets and pods are its own while a
// Service selecting the workload's labels reaches both.
func Canary(m *unstructured.Unstructured) error {
	if m.GetKind() != "Deployment" {
		return fmt.Errorf("%s %s cannot run a canary: setWeight steps work for Deployments only", m.GetKind(), m.GetName())
	}
	m.SetName(CanaryName(m.GetName()))
	labels := m.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[CanaryRoleLabel] = "canary"
	m.SetLabels(labels)
	for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		if err := unstructured.SetNestedField(m.Object, "canary", append(path, CanaryRoleLabel)...); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(path, "."), err)
		}
	}
	return nil
}
