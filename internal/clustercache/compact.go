package clustercache

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// The member object informers hold every object Flotilla applied, in every member, for the life
// of the process: at 20 members of 250 Deployments that is 5000 objects, the largest part of the
// controller-manager's heap. Decoded, an object is a tree of maps (a Deployment with its status,
// about 9 KiB); as the JSON it was decoded from, it is a quarter of that. So an informer's store
// keeps each object as compactObject: the metadata the store's keys and the event handlers read,
// and the object's JSON, decoded again on each read (CachedObject). A read costs a decode (tens
// of microseconds for a Deployment) and gives the caller its own copy, which it may change.

// compactObject is a member object as an informer's store keeps it.
type compactObject struct {
	// ObjectMeta holds the name, namespace and resource version (the store's key and the
	// reflector's bookkeeping) and the annotations (which name the object's Work), nothing else.
	metav1.ObjectMeta
	raw []byte // the whole object (managedFields trimmed by kube.TrimMemberObject), as JSON
}

var _ runtime.Object = (*compactObject)(nil)

func (c *compactObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the metadata; raw is shared, as it is never changed once made.
func (c *compactObject) DeepCopyObject() runtime.Object {
	return &compactObject{ObjectMeta: *c.ObjectMeta.DeepCopy(), raw: c.raw}
}

// object decodes the member object, as the informer decoded it from the member's answer.
func (c *compactObject) object() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(c.raw); err != nil {
		return nil, fmt.Errorf("decoding cached %s/%s: %w", c.Namespace, c.Name, err)
	}
	return u, nil
}

// compactMemberObject is the transform of the member object informers: the managedFields no
// reader needs go (kube.TrimMemberObject), then the object is kept as compactObject.
func compactMemberObject(in any) (any, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil // a compactObject already, or a tombstone
	}
	if _, err := kube.TrimMemberObject(u); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s for the cache: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &compactObject{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion(),
			Annotations: u.GetAnnotations()},
		raw: raw,
	}, nil
}
