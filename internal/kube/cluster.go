package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// Unreachable reports whether the cluster carries the NoExecute unreachable taint.
func Unreachable(cl *clusterv1alpha1.Cluster) bool {
	for _, t := range cl.Spec.Taints {
		if t.Key == names.UnreachableTaintKey && t.Effect == clusterv1alpha1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// Serves says whether a cluster's discovered APIs include the kind.
func Serves(cl *clusterv1alpha1.Cluster, gvk schema.GroupVersionKind) bool {
	for _, e := range cl.Status.APIEnablements {
		if e.GroupVersion != gvk.GroupVersion().String() {
			continue
		}
		for _, r := range e.Resources {
			if r.Kind == gvk.Kind {
				return true
			}
		}
	}
	return false
}
