package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Informer caches hold every watched object for the life of the process, and the largest part
// of most objects is what no controller reads: managedFields (each field of the object again,
// once per field manager, as nested maps in an unstructured object) and kubectl's
// last-applied-configuration annotation (the whole object again, as a string). The transforms
// below drop them as objects enter a cache and keep exactly what the controllers read.
//
// An object read from a trimmed cache must not be sent back with Update as it is: the API
// server takes managedFields that a request carries as the new ones. Objects whose
// managedFields are removed are safe (the server then keeps the live ones); the entries kept
// without their fields are not, so those objects are written with patches or applies only,
// which carry no managedFields. Flotilla writes templates and member objects that way.

// LastAppliedAnnotation is kubectl's client-side-apply record of the whole object.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TrimControlPlaneObject is the transform of the control-plane cache. Typed objects (bindings,
// Clusters, Secrets, releases...) lose their managedFields: no controller reads them.
// Unstructured objects (templates of every kind) keep one line per field manager, without its
// fields, since history names a template's last writer from them (manager, operation,
// subresource, time), and lose the last-applied-configuration annotation, which rendering
// drops anyway.
func TrimControlPlaneObject(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		trimUnstructured(u, func(map[string]any) (keep, keepFields bool) { return true, false })
		if a := u.GetAnnotations(); a != nil {
			if _, ok := a[LastAppliedAnnotation]; ok {
				unstructured.RemoveNestedField(u.Object, "metadata", "annotations", LastAppliedAnnotation)
			}
		}
		return u, nil
	}
	// A nil check first: setting nil managedFields on an object without them allocates.
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	return in, nil
}

// TrimMemberObject is the first step of the member object informers' transform (unstructured
// objects Flotilla applied; clustercache then keeps them as JSON). The executor reads three things of a member object's managedFields: that
// Flotilla's field manager applied fields of it (whether an unlabelled object is still
// Flotilla's), who wrote through the scale subresource (a change of scale ownership may be
// drift), and whether that writer owns spec.replicas (then Flotilla leaves replicas to it).
// So Flotilla's apply entries are kept without their fields, scale entries whole (a few bytes),
// and every other entry goes.
func TrimMemberObject(in any) (any, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	trimUnstructured(u, func(e map[string]any) (keep, keepFields bool) {
		if e["subresource"] == "scale" {
			return true, true
		}
		return e["manager"] == FieldManager && e["operation"] == string(metav1.ManagedFieldsOperationApply), false
	})
	return u, nil
}

// trimUnstructured keeps the managedFields entries of u that keep says to keep, with their
// fieldsV1 only where it says so; u's map is changed in place, without a round trip through
// typed entries.
func trimUnstructured(u *unstructured.Unstructured, keep func(entry map[string]any) (keep, keepFields bool)) {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	if entries == nil {
		return
	}
	kept := entries[:0]
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		k, fields := keep(m)
		if !k {
			continue
		}
		if !fields {
			delete(m, "fieldsV1")
		}
		kept = append(kept, m)
	}
	clear(entries[len(kept):]) // no references kept past the end
	if len(kept) == 0 {
		delete(md, "managedFields")
		return
	}
	md["managedFields"] = kept
}
