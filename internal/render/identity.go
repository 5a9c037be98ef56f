package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CheckIdentity refuses a manifest whose overrides changed what object it is: apiVersion,
// kind, metadata.namespace or metadata.name differ from before (the manifest as rendered
// from its template, before overrides). Admission already refuses JSON patches at those
// paths; this holds for every overrider, including ones added later, because a namespaced
// policy must only ever write the object its template names, in the template's namespace.
func CheckIdentity(before, after *unstructured.Unstructured) error {
	for _, f := range []struct {
		field      string
		was, isNow string
	}{
		{"apiVersion", before.GetAPIVersion(), after.GetAPIVersion()},
		{"kind", before.GetKind(), after.GetKind()},
		{"metadata.namespace", before.GetNamespace(), after.GetNamespace()},
		{"metadata.name", before.GetName(), after.GetName()},
	} {
		if f.was != f.isNow {
			return fmt.Errorf("overrides changed %s of %s %s from %q to %q: overrides change content, not identity (the object is placed where its template is); remove the override of %s",
				f.field, before.GetKind(), objectRef(before), f.was, f.isNow, f.field)
		}
	}
	return nil
}

// objectRef is namespace/name, or name for a cluster-scoped object.
func objectRef(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}
