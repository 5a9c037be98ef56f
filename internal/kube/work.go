package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// ExecutionNamespacePrefix starts the namespaces of the control plane that hold Works.
const ExecutionNamespacePrefix = "flotilla-es-"

// GetWork reads a binding's Work in one cluster: by its name, else by its labels (a Work
// written under the names of an earlier version keeps its name).
func GetWork(ctx context.Context, c client.Reader, bindingNamespace, binding, cluster string, w *workv1alpha1.Work) error {
	ns := ExecutionNamespacePrefix + cluster
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: workv1alpha1.WorkName(bindingNamespace, binding)}, w)
	if !apierrors.IsNotFound(err) {
		return err
	}
	list := &workv1alpha1.WorkList{}
	if lerr := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		workv1alpha1.BindingNamespaceLabel: bindingNamespace, workv1alpha1.BindingNameLabel: binding}); lerr != nil || len(list.Items) == 0 {
		return err
	}
	list.Items[0].DeepCopyInto(w)
	return nil
}
