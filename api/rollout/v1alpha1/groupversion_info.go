package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "rollout.flotilla.dev", Version: "v1alpha1"}

// SchemeGroupVersion is GroupVersion under the name the generated apply configurations
// (applyconfiguration.ForKind) use.
var SchemeGroupVersion = GroupVersion

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Release{}, &ReleaseList{},
		&AnalysisTemplate{}, &AnalysisTemplateList{}, &ClusterAnalysisTemplate{}, &ClusterAnalysisTemplateList{},
		&AnalysisRun{}, &AnalysisRunList{},
		&ChangeWindow{}, &ChangeWindowList{}, &ClusterChangeWindow{}, &ClusterChangeWindowList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
