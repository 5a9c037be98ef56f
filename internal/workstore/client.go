package workstore

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Client returns a client that serves *Work and *WorkList from the store and passes every other
// type, and the scheme, REST mapper and type lookups, to c.
func (s *Store) Client(c client.Client) client.Client {
	return &workClient{Client: c, store: s}
}

// workClient embeds the delegate so that whatever it does not override goes to the apiserver.
type workClient struct {
	client.Client
	store *Store
}

// untypedWork refuses Works in unstructured or metadata-only form: the store speaks typed Works,
// and sending them to the apiserver would read or write Works that no longer live there.
func untypedWork(obj runtime.Object) error {
	if isWorkGVK(obj.GetObjectKind().GroupVersionKind()) {
		return fmt.Errorf("workstore: %T holding a Work: Works live in memory and are served as *v1alpha1.Work and *v1alpha1.WorkList only", obj)
	}
	return nil
}

func isWorkGVK(gvk schema.GroupVersionKind) bool {
	return gvk.Group == workv1alpha1.GroupVersion.Group && (gvk.Kind == workGVK.Kind || gvk.Kind == workListGVK.Kind)
}

// shared says whether a read asked for the stored Works themselves (client.UnsafeDisableDeepCopy),
// as a cache would give them: the reader gets their spec, status and metadata shared and must
// not modify them, and a read of a whole manifest list costs no copy.
func shared(unsafeDisableDeepCopy *bool) bool {
	return unsafeDisableDeepCopy != nil && *unsafeDisableDeepCopy
}

func dryRun(opts []string) bool { return slices.Contains(opts, metav1.DryRunAll) }

func (c *workClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.get(key, w, shared((&client.GetOptions{}).ApplyOptions(opts).UnsafeDisableDeepCopy))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *workClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*workv1alpha1.WorkList); ok {
		lo := (&client.ListOptions{}).ApplyOptions(opts)
		return c.store.list(lo, l, shared(lo.UnsafeDisableDeepCopy))
	}
	if err := untypedWork(list); err != nil {
		return err
	}
	return c.Client.List(ctx, list, opts...)
}

func (c *workClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.create(w, dryRun((&client.CreateOptions{}).ApplyOptions(opts).DryRun))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *workClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.update(w, dryRun((&client.UpdateOptions{}).ApplyOptions(opts).DryRun))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *workClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.patch(w, patch, false, dryRun((&client.PatchOptions{}).ApplyOptions(opts).DryRun))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *workClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if appliesToWork(obj) {
		return errServerSideApply
	}
	return c.Client.Apply(ctx, obj, opts...)
}

// appliesToWork reads the kind of a typed apply configuration (pointer getters) or of an
// unstructured one (client.ApplyConfigurationFromUnstructured).
func appliesToWork(obj runtime.ApplyConfiguration) bool {
	if typed, ok := obj.(interface {
		GetKind() *string
		GetAPIVersion() *string
	}); ok {
		if typed.GetKind() == nil || typed.GetAPIVersion() == nil {
			return false
		}
		gv, err := schema.ParseGroupVersion(*typed.GetAPIVersion())
		return err == nil && isWorkGVK(gv.WithKind(*typed.GetKind()))
	}
	if o, ok := obj.(runtime.Object); ok {
		return isWorkGVK(o.GetObjectKind().GroupVersionKind())
	}
	return false
}

func (c *workClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.delete(obj, (&client.DeleteOptions{}).ApplyOptions(opts))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *workClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if _, ok := obj.(*workv1alpha1.Work); ok {
		return c.store.deleteAllOf((&client.DeleteAllOfOptions{}).ApplyOptions(opts))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

// IsObjectNamespaced answers for Works itself: once their CRD leaves the apiserver, the
// delegate's REST mapper no longer knows them.
func (c *workClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	switch obj.(type) {
	case *workv1alpha1.Work, *workv1alpha1.WorkList:
		return true, nil
	}
	return c.Client.IsObjectNamespaced(obj)
}

func (c *workClient) Status() client.SubResourceWriter {
	return &subResourceClient{name: "status", store: c.store, delegate: c.Client.SubResource("status"), writer: c.Client.Status()}
}

func (c *workClient) SubResource(name string) client.SubResourceClient {
	delegate := c.Client.SubResource(name)
	return &subResourceClient{name: name, store: c.store, delegate: delegate, writer: delegate}
}

// subResourceClient writes the status of stored Works; any other subresource of a Work is an
// error, and other types go to the delegate (writer for writes, so Status() keeps using the
// delegate's own status writer).
type subResourceClient struct {
	name     string
	store    *Store
	delegate client.SubResourceClient
	writer   client.SubResourceWriter
}

func (c *subResourceClient) unsupported() error {
	return fmt.Errorf("workstore: subresource %q of Works: Works in memory have only the status subresource, written with Update or Patch", c.name)
}

func (c *subResourceClient) Get(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceGetOption) error {
	if _, ok := obj.(*workv1alpha1.Work); ok {
		return c.unsupported()
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.delegate.Get(ctx, obj, subResource, opts...)
}

func (c *subResourceClient) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	if _, ok := obj.(*workv1alpha1.Work); ok {
		return c.unsupported()
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.writer.Create(ctx, obj, subResource, opts...)
}

func (c *subResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		if c.name != "status" {
			return c.unsupported()
		}
		return c.store.updateStatus(w, dryRun((&client.SubResourceUpdateOptions{}).ApplyOptions(opts).DryRun))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.writer.Update(ctx, obj, opts...)
}

func (c *subResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		if c.name != "status" {
			return c.unsupported()
		}
		return c.store.patch(w, patch, true, dryRun((&client.SubResourcePatchOptions{}).ApplyOptions(opts).DryRun))
	}
	if err := untypedWork(obj); err != nil {
		return err
	}
	return c.writer.Patch(ctx, obj, patch, opts...)
}

func (c *subResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if appliesToWork(obj) {
		return errServerSideApply
	}
	return c.writer.Apply(ctx, obj, opts...)
}
