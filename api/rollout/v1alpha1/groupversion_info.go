// Package v1alpha1 holds the rollout.flotilla.dev API: Release, one per template revision
// change, moving the binding's per-cluster revision pins wave by wave; and AnalysisTemplate,
// ClusterAnalysisTemplate and AnalysisRun, shaped like Argo Rollouts' so existing templates
// port with few changes. It depends only on k8s.io/apimachinery and the policy API.
// +kubebuilder:object:generate=true
// +groupName=rollout.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "rollout.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Release{}, &ReleaseList{},
		&AnalysisTemplate{}, &AnalysisTemplateList{}, &ClusterAnalysisTemplate{}, &ClusterAnalysisTemplateList{},
		&AnalysisRun{}, &AnalysisRunList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
