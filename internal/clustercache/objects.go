package clustercache

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// ManagedSelector selects the member objects Flotilla applied; only those are watched.
const ManagedSelector = "work.flotilla.dev/managed-by=flotilla"

// ObjectEvent says that a managed member object changed. Object holds the object's name,
// namespace and annotations; read the whole object with CachedObject.
type ObjectEvent struct {
	Cluster string
	Object  metav1.Object
}

// objectWatches is the member-side part of a connection: a REST mapper and one informer per
// resource in use, all limited to objects Flotilla manages.
type objectWatches struct {
	mapper  *memberMapper
	factory dynamicinformer.DynamicSharedInformerFactory
	started map[schema.GroupVersionResource]cache.SharedIndexInformer
	stop    chan struct{}
}

func (m *member) initObjectWatches(mappers *mapperPool) {
	m.objects = &objectWatches{
		mapper:  &memberMapper{pool: mappers, discovery: m.Clientset.Discovery()},
		factory: dynamicinformer.NewFilteredDynamicSharedInformerFactory(m.Dynamic, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector }),
		started: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		stop:    make(chan struct{}),
	}
}

// RESTMapping maps a kind to its resource in the member, refreshing discovery once when the
// kind is unknown (a CRD installed after the connection was made).
func (c *Cache) RESTMapping(cluster string, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.member(cluster)
	if err != nil {
		return nil, err
	}
	mapping, err := m.objects.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		m.objects.mapper.Reset()
		mapping, err = m.objects.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s does not serve %s: %w", cluster, gvk, err)
	}
	return mapping, nil
}

// WatchObjects makes sure the managed objects of a resource in a member are watched; every
// change is delivered to onEvent. It returns the informer's store lookup.
func (c *Cache) WatchObjects(cluster string, gvr schema.GroupVersionResource, onEvent func(ObjectEvent)) error {
	m, err := c.member(cluster)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := m.objects.started[gvr]; ok {
		return nil
	}
	inf := m.objects.factory.ForResource(gvr).Informer()
	if err := inf.SetTransform(compactMemberObject); err != nil {
		return err
	}
	send := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if co, ok := obj.(*compactObject); ok {
			onEvent(ObjectEvent{Cluster: cluster, Object: co})
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: send, UpdateFunc: func(_, n any) { send(n) }, DeleteFunc: send,
	}); err != nil {
		return err
	}
	m.objects.started[gvr] = inf
	m.objects.factory.Start(m.objects.stop)
	return nil
}

// CachedObject returns a managed member object from the member's informer, once synced; ok is
// false when it is not known (not watched, not synced or absent). The object is decoded on each
// call (see compact.go): it is the caller's own.
func (c *Cache) CachedObject(cluster string, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool) {
	obj, _ := c.LookupObject(cluster, gvr, namespace, name)
	return obj, obj != nil
}

// LookupObject is CachedObject that also says whether the cache could answer: listed is false
// when no synced informer of gvr holds this member's objects at the time of the call (not
// started, not listed yet, or the member disconnected from this replica, as when its shard moves
// to another one). Only a listed miss means the member holds no such object of Flotilla's.
func (c *Cache) LookupObject(cluster string, gvr schema.GroupVersionResource, namespace, name string) (obj *unstructured.Unstructured, listed bool) {
	m, err := c.member(cluster)
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	inf, ok := m.objects.started[gvr]
	c.mu.Unlock()
	if !ok || !inf.HasSynced() {
		return nil, false
	}
	select {
	case <-m.objects.stop:
		return nil, false // stopped: its store no longer follows the member
	default:
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	item, exists, err := inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, false
	}
	if !exists {
		return nil, true
	}
	co, ok := item.(*compactObject)
	if !ok {
		return nil, false
	}
	u, err := co.object()
	if err != nil {
		return nil, false // not possible: the JSON was encoded from a decoded object
	}
	return u, true
}

// WaitObjectsSynced waits briefly for a member's object informer of gvr to sync.
func (c *Cache) WaitObjectsSynced(cluster string, gvr schema.GroupVersionResource, timeout time.Duration) bool {
	m, err := c.member(cluster)
	if err != nil {
		return false
	}
	c.mu.Lock()
	inf, ok := m.objects.started[gvr]
	c.mu.Unlock()
	if !ok {
		return false
	}
	stop := make(chan struct{})
	t := time.AfterFunc(timeout, func() { close(stop) })
	defer t.Stop()
	return cache.WaitForCacheSync(stop, inf.HasSynced)
}

func (c *Cache) member(cluster string) (*member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %s: %w", cluster, ErrNotConnected)
	}
	return m, nil
}
