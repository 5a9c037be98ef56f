// Package workstore keeps Works in the controller-manager's memory instead of the kube-apiserver,
// so rendering a binding for a member costs no control-plane write. It owns the Works and their
// events: the controllers read and write them through Store.Client, a controller-runtime client
// that serves Works from the store and passes every other type to the apiserver, and watch them
// through Store.Source. It must not touch anything but Works: no other type is stored, and it
// never writes a Work to the apiserver.
//
// The store follows the apiserver's rules for a custom resource with a status subresource, so
// the controllers keep their code: resource versions and optimistic locking, generation moving
// on spec changes, status written only through Status(), finalizers holding a deletion, and a
// write that changes nothing being no write at all (no new version, no event).
//
// A sharded controller-manager keeps one more store per replica, a mirror of the leader's Works
// of the clusters the replica holds (see mirror.go and package worksync): Follow streams a
// store's Works, Mirror and MirrorDeleted take the leader's changes into a mirror, Forget drops
// what a replica no longer holds, and Apply takes a replica's report (status and finalizers,
// the fields only its executor writes) back into the leader's store.
package workstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

var (
	workResource = schema.GroupResource{Group: workv1alpha1.GroupVersion.Group, Resource: "works"}
	workKind     = schema.GroupKind{Group: workv1alpha1.GroupVersion.Group, Kind: "Work"}
	workGVK      = workv1alpha1.GroupVersion.WithKind("Work")
	workListGVK  = workv1alpha1.GroupVersion.WithKind("WorkList")
)

// errServerSideApply: the store keeps no managed fields, so it cannot merge applied configurations.
var errServerSideApply = errors.New("workstore: Works live in memory and do not take server-side apply; use Create, Update or Patch")

// Store holds Works keyed by namespace/name. A stored Work is never modified in place: every
// write stores a new object, so events can share it and hand out copies later.
type Store struct {
	mu    sync.RWMutex
	works map[types.NamespacedName]*workv1alpha1.Work
	// byNamespace and byBinding index the works, so that the lists controllers make on every
	// pass (a binding's Works, a cluster's Works) cost what they return, not the whole store.
	byNamespace map[string]keySet
	byBinding   map[types.NamespacedName]keySet
	version     uint64
	subscribers map[*subscriber]struct{}
	// id names this store among others (mirrors tell a leader's restart by it).
	id string
}

type keySet map[types.NamespacedName]struct{}

// New returns an empty store.
func New() *Store {
	return &Store{
		works:       map[types.NamespacedName]*workv1alpha1.Work{},
		byNamespace: map[string]keySet{},
		byBinding:   map[types.NamespacedName]keySet{},
		subscribers: map[*subscriber]struct{}{},
		id:          string(uuid.NewUUID()),
	}
}

// bindingOf is the binding a Work renders, from its labels.
func bindingOf(w *workv1alpha1.Work) (types.NamespacedName, bool) {
	ns, okNamespace := w.Labels[workv1alpha1.BindingNamespaceLabel]
	name, okName := w.Labels[workv1alpha1.BindingNameLabel]
	return types.NamespacedName{Namespace: ns, Name: name}, okNamespace && okName
}

// put stores w under key and keeps the indexes. The caller holds s.mu.
func (s *Store) put(key types.NamespacedName, w *workv1alpha1.Work) {
	s.remove(key)
	s.works[key] = w
	add := func(set keySet) keySet {
		if set == nil {
			set = keySet{}
		}
		set[key] = struct{}{}
		return set
	}
	s.byNamespace[key.Namespace] = add(s.byNamespace[key.Namespace])
	if b, ok := bindingOf(w); ok {
		s.byBinding[b] = add(s.byBinding[b])
	}
}

// remove drops the Work under key, if any, from the store and its indexes. The caller holds
// s.mu.
func (s *Store) remove(key types.NamespacedName) {
	old, ok := s.works[key]
	if !ok {
		return
	}
	delete(s.works, key)
	unindex(s.byNamespace, key.Namespace, key)
	if b, ok := bindingOf(old); ok {
		unindex(s.byBinding, b, key)
	}
}

// unindex drops key from the set at k, and the set once it is empty.
func unindex[K comparable](index map[K]keySet, k K, key types.NamespacedName) {
	delete(index[k], key)
	if len(index[k]) == 0 {
		delete(index, k)
	}
}

// Len is the number of Works stored, those waiting for their finalizers included.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.works)
}

func (s *Store) get(key types.NamespacedName, out *workv1alpha1.Work, shared bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.works[key]
	if !ok {
		return apierrors.NewNotFound(workResource, key.Name)
	}
	*out = readOf(w, shared)
	return nil
}

// readOf is what a reader gets of a stored Work: a copy, or the Work itself shallowly (its
// fields shared) for a reader that promised not to modify it.
func readOf(w *workv1alpha1.Work, shared bool) workv1alpha1.Work {
	if shared {
		return *w
	}
	return *w.DeepCopy()
}

func (s *Store) list(opts *client.ListOptions, out *workv1alpha1.WorkList, shared bool) error {
	matches, err := selector(opts)
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	items := []workv1alpha1.Work{}
	for _, w := range s.candidates(opts) {
		if matches(w) {
			items = append(items, readOf(w, shared))
		}
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: workListGVK.GroupVersion().String(), Kind: workListGVK.Kind}
	out.ListMeta = metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.version, 10)}
	out.Items = items
	return nil
}

// candidates are the stored Works a list can match, by namespace/name: those of one binding when
// the label selector names it exactly, else those of the namespace listed, else all. The caller
// holds s.mu and still filters them.
func (s *Store) candidates(opts *client.ListOptions) []*workv1alpha1.Work {
	if sel := opts.LabelSelector; sel != nil {
		ns, okNamespace := sel.RequiresExactMatch(workv1alpha1.BindingNamespaceLabel)
		name, okName := sel.RequiresExactMatch(workv1alpha1.BindingNameLabel)
		if okNamespace && okName {
			return s.sortedKeys(s.byBinding[types.NamespacedName{Namespace: ns, Name: name}])
		}
	}
	if opts.Namespace != "" {
		return s.sortedKeys(s.byNamespace[opts.Namespace])
	}
	return s.sorted()
}

// sortedKeys returns the stored Works of keys by namespace/name. The caller holds s.mu.
func (s *Store) sortedKeys(keys keySet) []*workv1alpha1.Work {
	works := make([]*workv1alpha1.Work, 0, len(keys))
	for key := range keys {
		works = append(works, s.works[key])
	}
	sortWorks(works)
	return works
}

// sorted returns the stored Works by namespace/name, so lists and initial events are repeatable.
// The caller holds s.mu.
func (s *Store) sorted() []*workv1alpha1.Work {
	works := make([]*workv1alpha1.Work, 0, len(s.works))
	for _, w := range s.works {
		works = append(works, w)
	}
	sortWorks(works)
	return works
}

func sortWorks(works []*workv1alpha1.Work) {
	slices.SortFunc(works, func(a, b *workv1alpha1.Work) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// selector turns the list options into a filter. Limit and Continue are ignored: every list is
// one page. A field selector may only name metadata.name and metadata.namespace, the fields the
// apiserver indexes for custom resources; anything else is refused rather than matching nothing.
func selector(opts *client.ListOptions) (func(*workv1alpha1.Work) bool, error) {
	labelSelector := opts.LabelSelector
	if labelSelector == nil {
		labelSelector = labels.Everything()
	}
	fieldSelector := opts.FieldSelector
	if fieldSelector == nil {
		fieldSelector = fields.Everything()
	}
	for _, r := range fieldSelector.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: field selector %q: Works can be selected by metadata.name and metadata.namespace only", r.Field))
		}
	}
	return func(w *workv1alpha1.Work) bool {
		return (opts.Namespace == "" || w.Namespace == opts.Namespace) &&
			labelSelector.Matches(labels.Set(w.Labels)) &&
			fieldSelector.Matches(fields.Set{"metadata.name": w.Name, "metadata.namespace": w.Namespace})
	}, nil
}

func (s *Store) create(w *workv1alpha1.Work, dryRun bool) error {
	if w.ResourceVersion != "" {
		return apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	next, err := normalize(w)
	if err != nil {
		return err
	}
	if next.Name == "" && next.GenerateName != "" {
		next.Name = next.GenerateName + utilrand.String(5)
	}
	if err := validateKey(next); err != nil {
		return err
	}
	next.UID = uuid.NewUUID()
	next.Generation = 1
	next.CreationTimestamp = metav1.Now().Rfc3339Copy()
	next.DeletionTimestamp, next.DeletionGracePeriodSeconds, next.ManagedFields = nil, nil, nil
	next.Status = workv1alpha1.WorkStatus{}

	s.mu.Lock()
	defer s.mu.Unlock()
	key := client.ObjectKeyFromObject(next)
	if _, ok := s.works[key]; ok {
		return apierrors.NewAlreadyExists(workResource, key.Name)
	}
	if !dryRun {
		s.version++
		next.ResourceVersion = strconv.FormatUint(s.version, 10)
		s.put(key, next)
		s.publish(change{kind: created, now: next})
	}
	*w = *next.DeepCopy()
	return nil
}

func validateKey(w *workv1alpha1.Work) error {
	var errs field.ErrorList
	if w.Name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "name or generateName is required"))
	}
	if w.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "namespace"), "Works are namespaced"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(workKind, w.Name, errs)
	}
	return nil
}

func (s *Store) update(w *workv1alpha1.Work, dryRun bool) error {
	next, err := normalize(w)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.current(w, w.UID, w.ResourceVersion)
	if err != nil {
		return err
	}
	stored, err := s.writeMain(old, next, dryRun)
	if err != nil {
		return err
	}
	*w = *stored.DeepCopy()
	return nil
}

func (s *Store) updateStatus(w *workv1alpha1.Work, dryRun bool) error {
	// Only the status is taken, so only it is normalized.
	given, err := normalize(&workv1alpha1.Work{Status: w.Status})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.current(w, w.UID, w.ResourceVersion)
	if err != nil {
		return err
	}
	next := withStatus(old, given.Status)
	*w = *s.commit(old, next, dryRun).DeepCopy()
	return nil
}

// patch applies a merge or JSON patch to the stored Work: the whole object but its status, or
// only its status.
func (s *Store) patch(w *workv1alpha1.Work, patch client.Patch, status, dryRun bool) error {
	data, err := patch.Data(w)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.current(w, "", "")
	if err != nil {
		return err
	}
	var patched *workv1alpha1.Work
	if status {
		patched, err = applyStatusPatch(old, patch.Type(), data)
	} else {
		patched, err = applyPatch(old, patch.Type(), data)
	}
	if err != nil {
		return err
	}
	// A patch carrying metadata.uid or metadata.resourceVersion makes them preconditions (this is
	// how MergeFromWithOptimisticLock works).
	if _, err := s.current(old, patched.UID, patched.ResourceVersion); err != nil {
		return err
	}
	if patched.Name != old.Name || patched.Namespace != old.Namespace {
		return apierrors.NewInvalid(workKind, old.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata"), "a patch cannot change the name or namespace")})
	}
	var stored *workv1alpha1.Work
	if status {
		stored = s.commit(old, withStatus(old, patched.Status), dryRun)
	} else if stored, err = s.writeMain(old, patched, dryRun); err != nil {
		return err
	}
	*w = *stored.DeepCopy()
	return nil
}

// applyStatusPatch patches the status: only it is kept from the result, so the patch is applied
// to the Work without its spec, whose manifests are most of its size and would be encoded and
// decoded on every status write. A JSON patch that names the spec (a test of it, say) gets the
// whole Work.
func applyStatusPatch(old *workv1alpha1.Work, patchType types.PatchType, data []byte) (*workv1alpha1.Work, error) {
	withoutSpec := &workv1alpha1.Work{TypeMeta: old.TypeMeta, ObjectMeta: old.ObjectMeta, Status: old.Status}
	patched, err := applyPatch(withoutSpec, patchType, data)
	if err != nil && patchType == types.JSONPatchType {
		return applyPatch(old, patchType, data)
	}
	return patched, err
}

func applyPatch(old *workv1alpha1.Work, patchType types.PatchType, data []byte) (*workv1alpha1.Work, error) {
	doc, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	switch patchType {
	case types.MergePatchType:
		doc, err = jsonpatch.MergePatch(doc, data)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			doc, err = p.Apply(doc)
		}
	case types.ApplyPatchType, types.ApplyCBORPatchType:
		return nil, errServerSideApply
	default:
		// The apiserver takes no strategic merge patch for custom resources either.
		return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: patch type %q is not supported for Works; use a merge or JSON patch", patchType))
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: applying the patch: %v", err))
	}
	patched := &workv1alpha1.Work{}
	if err := json.Unmarshal(doc, patched); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: the patched Work does not decode: %v", err))
	}
	patched.TypeMeta = metav1.TypeMeta{APIVersion: workGVK.GroupVersion().String(), Kind: workGVK.Kind}
	return patched, nil
}

// current returns the stored Work with obj's key, checking the uid and resourceVersion
// preconditions when they are set. The caller holds s.mu.
func (s *Store) current(obj client.Object, uid types.UID, resourceVersion string) (*workv1alpha1.Work, error) {
	old, ok := s.works[client.ObjectKeyFromObject(obj)]
	if !ok {
		return nil, apierrors.NewNotFound(workResource, obj.GetName())
	}
	if uid != "" && uid != old.UID {
		return nil, apierrors.NewConflict(workResource, old.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, old.UID))
	}
	if resourceVersion != "" && resourceVersion != old.ResourceVersion {
		return nil, apierrors.NewConflict(workResource, old.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return old, nil
}

// writeMain stores next as a write to the main resource: metadata and spec from next, status and
// the fields the apiserver owns from old. The caller holds s.mu.
func (s *Store) writeMain(old, next *workv1alpha1.Work, dryRun bool) (*workv1alpha1.Work, error) {
	if old.DeletionTimestamp != nil {
		for _, f := range next.Finalizers {
			if !slices.Contains(old.Finalizers, f) {
				return nil, apierrors.NewInvalid(workKind, old.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
					fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizer %q", f))})
			}
		}
	}
	next.UID, next.ResourceVersion, next.Generation = old.UID, old.ResourceVersion, old.Generation
	next.CreationTimestamp, next.DeletionTimestamp, next.DeletionGracePeriodSeconds = old.CreationTimestamp, old.DeletionTimestamp, old.DeletionGracePeriodSeconds
	next.ManagedFields = nil
	next.Status = *old.Status.DeepCopy()
	if !apiequality.Semantic.DeepEqual(old.Spec, next.Spec) {
		next.Generation++
	}
	return s.commit(old, next, dryRun), nil
}

// commit replaces old by next and returns what is stored. Like the apiserver, a write that
// changes nothing is dropped: no new resourceVersion and no event, so a controller does not
// wake itself with its own empty patches. A Work being deleted that has lost its last finalizer
// is removed. The caller holds s.mu.
func (s *Store) commit(old, next *workv1alpha1.Work, dryRun bool) *workv1alpha1.Work {
	if apiequality.Semantic.DeepEqual(old, next) {
		return old
	}
	if dryRun {
		return next
	}
	s.version++
	next.ResourceVersion = strconv.FormatUint(s.version, 10)
	key := client.ObjectKeyFromObject(next)
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		s.remove(key)
		s.publish(change{kind: deleted, now: next})
		return next
	}
	s.put(key, next)
	s.publish(change{kind: updated, before: old, now: next})
	return next
}

func (s *Store) delete(obj client.Object, opts *client.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(client.ObjectKeyFromObject(obj), opts)
}

// deleteLocked marks a Work with finalizers as deleting (once) and removes one without. The
// caller holds s.mu.
func (s *Store) deleteLocked(key types.NamespacedName, opts *client.DeleteOptions) error {
	var uid types.UID
	var resourceVersion string
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			uid = *p.UID
		}
		if p.ResourceVersion != nil {
			resourceVersion = *p.ResourceVersion
		}
	}
	old, err := s.current(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, uid, resourceVersion)
	if err != nil {
		return err
	}
	dryRun := slices.Contains(opts.DryRun, metav1.DryRunAll)
	if len(old.Finalizers) > 0 {
		if old.DeletionTimestamp != nil {
			return nil
		}
		next := old.DeepCopy()
		now := metav1.Now().Rfc3339Copy()
		var noGrace int64
		next.DeletionTimestamp, next.DeletionGracePeriodSeconds = &now, &noGrace
		// The apiserver moves the generation when it marks a custom resource as deleting; the
		// executor's GenerationChangedPredicate relies on it to see the deletion.
		next.Generation++
		s.commit(old, next, dryRun)
		return nil
	}
	if dryRun {
		return nil
	}
	s.version++
	gone := old.DeepCopy()
	gone.ResourceVersion = strconv.FormatUint(s.version, 10)
	s.remove(key)
	s.publish(change{kind: deleted, now: gone})
	return nil
}

func (s *Store) deleteAllOf(opts *client.DeleteAllOfOptions) error {
	matches, err := selector(&opts.ListOptions)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.candidates(&opts.ListOptions) {
		if !matches(w) {
			continue
		}
		if err := s.deleteLocked(client.ObjectKeyFromObject(w), &opts.DeleteOptions); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// normalize returns a copy of w as the apiserver would store it: through JSON, so that a Work
// read back equals one written (timestamps to the second, raw manifests compacted, empty maps
// dropped) and comparisons find only real changes.
// withStatus is old with another status, to store in its place. Its spec and metadata are
// old's, shared, not copied: a stored Work is never modified, and a status write would
// otherwise copy every manifest of the Work (most of its size) and its labels once more. A
// caller replaces a shared field (ResourceVersion, Finalizers) whole, never changes it in place.
func withStatus(old *workv1alpha1.Work, status workv1alpha1.WorkStatus) *workv1alpha1.Work {
	return &workv1alpha1.Work{TypeMeta: old.TypeMeta, ObjectMeta: old.ObjectMeta, Spec: old.Spec, Status: status}
}

func normalize(w *workv1alpha1.Work) (*workv1alpha1.Work, error) {
	data, err := json.Marshal(w)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: the Work does not encode: %v", err))
	}
	out := &workv1alpha1.Work{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("workstore: the Work does not decode: %v", err))
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: workGVK.GroupVersion().String(), Kind: workGVK.Kind}
	return out, nil
}
