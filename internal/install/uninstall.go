package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// UninstallOptions say how much to take out.
type UninstallOptions struct {
	// Purge also deletes Flotilla's CRDs with every object of them (Clusters, policies,
	// releases, ...), and the namespace with the members' credentials. Member objects stay.
	Purge bool
	// Out receives one line per object; nil says nothing.
	Out io.Writer
}

// Uninstall deletes what Apply installed, newest first: the manager, its identity and roles.
// Without Purge it keeps the CRDs, every Flotilla object, the admission policies that keep
// those objects Flotilla's (so nobody forges a binding while no manager runs) and the
// namespace holding the members' credentials: an install afterwards finds the fleet as it was.
func Uninstall(ctx context.Context, cfg *rest.Config, o UninstallOptions) error {
	objs, err := Objects(Options{Layout: Hosted})
	if err != nil {
		return err
	}
	t, err := newTarget(cfg, o.Out)
	if err != nil {
		return err
	}
	if _, err := t.kube.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w; check --kubeconfig/--context", t.host, err)
	}
	for i := len(objs) - 1; i >= 0; i-- {
		u := objs[i]
		keep := isCRD(u) || (u.GetKind() == "Namespace" && u.GetName() == Namespace) ||
			u.GroupVersionKind().Group == "admissionregistration.k8s.io"
		if keep && !o.Purge {
			continue
		}
		if isCRD(u) {
			if err := t.purgeObjectsOf(ctx, u); err != nil {
				return err
			}
		}
		if err := t.delete(ctx, u); err != nil {
			return err
		}
	}
	if !o.Purge {
		fmt.Fprintf(t.out, "kept: Flotilla's CRDs and their objects, the admission policies that guard them, and namespace %s with the members' credentials (flotilla uninstall --purge deletes them)\n", Namespace)
		return nil
	}
	return t.deleteExecutionNamespaces(ctx)
}

// deleteExecutionNamespaces removes the namespaces that held each member's Works: with the
// Clusters' finalizers dropped, no manager is left to remove them.
func (t *target) deleteExecutionNamespaces(ctx context.Context) error {
	list, err := t.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range list.Items {
		if !strings.HasPrefix(ns.Name, kube.ExecutionNamespacePrefix) || ns.DeletionTimestamp != nil {
			continue
		}
		if err := t.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); ignoreNotFound(err) != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		fmt.Fprintf(t.out, "namespace/%s deleted\n", ns.Name)
	}
	return nil
}

func (t *target) delete(ctx context.Context, u *unstructured.Unstructured) error {
	ri, err := t.resource(u)
	if meta.IsNoMatchError(errors.Unwrap(err)) {
		return nil // the kind is not served, so nothing of it is there
	}
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
	switch {
	case ignoreNotFound(err) != nil:
		return fmt.Errorf("%s: %w", ref(u), err)
	case err == nil:
		fmt.Fprintf(t.out, "%s deleted\n", ref(u))
	}
	return nil
}

// purgeObjectsOf deletes every object of a Flotilla CRD, dropping Flotilla's finalizers first:
// the manager that would have finished them is gone.
func (t *target) purgeObjectsOf(ctx context.Context, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return nil
	}
	version, _ := versions[0].(map[string]any)["name"].(string)
	ri := t.dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural})
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return ignoreNotFound(err)
	}
	for _, item := range list.Items {
		r := ri.Namespace(item.GetNamespace())
		if len(item.GetFinalizers()) > 0 {
			var kept []string
			for _, f := range item.GetFinalizers() {
				if domain, _, _ := strings.Cut(f, "/"); domain != "flotilla.dev" && !strings.HasSuffix(domain, ".flotilla.dev") {
					kept = append(kept, f)
				}
			}
			patch := fmt.Sprintf(`{"metadata":{"finalizers":%s}}`, jsonStrings(kept))
			if _, err := r.Patch(ctx, item.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); ignoreNotFound(err) != nil {
				return fmt.Errorf("%s %s: dropping finalizers: %w", plural, item.GetName(), err)
			}
		}
		if err := r.Delete(ctx, item.GetName(), metav1.DeleteOptions{}); ignoreNotFound(err) != nil {
			return fmt.Errorf("%s %s: %w", plural, item.GetName(), err)
		}
	}
	if len(list.Items) > 0 {
		fmt.Fprintf(t.out, "%d %s.%s deleted\n", len(list.Items), plural, group)
	}
	return nil
}

func jsonStrings(s []string) string {
	if len(s) == 0 {
		return "null"
	}
	return `["` + strings.Join(s, `","`) + `"]`
}
