package clustercache

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// servedAPISources are the member objects whose changes change what the member serves:
// CustomResourceDefinitions and aggregated APIServices. Only their metadata is watched, so a
// member with hundreds of large CRD schemas costs a few kilobytes here.
var servedAPISources = []schema.GroupVersionResource{
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

const (
	// apiChangeSettle lets a batch of CRDs (an operator's install) and the Established update
	// that follows each one arrive before discovery is read once for all of them.
	apiChangeSettle = time.Second
	// apiChangeRecheck reads discovery once more when the first read saw no change: the
	// member's discovery document can trail a CRD's Established condition by a moment.
	apiChangeRecheck = 3 * time.Second
	// apiChangeMinGap bounds the reads a member whose CRDs change all the time can cause.
	apiChangeMinGap = 5 * time.Second
	// unwatchedDiscoveryInterval is the periodic re-read while the watch has not listed yet.
	unwatchedDiscoveryInterval = 30 * time.Second
)

// watchServedAPIs signals m.apisChanged whenever a CRD or APIService is added, changed or
// removed in the member after the initial list. A member that forbids listing them keeps
// the periodic discovery; the informer's errors are logged by client-go and cost nothing else.
func (m *member) watchServedAPIs(ctx context.Context) {
	mc, err := metadata.NewForConfig(m.Config)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Cannot watch served APIs; discovery stays periodic", "cluster", m.Name)
		return
	}
	m.apiFactory = metadatainformer.NewSharedInformerFactory(mc, 0)
	signal := func() {
		select {
		case m.apisChanged <- struct{}{}:
		default: // a refresh is already pending
		}
	}
	handler := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				signal()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*metav1.PartialObjectMetadata)
			n, okNew := newObj.(*metav1.PartialObjectMetadata)
			if okOld && okNew && o.ResourceVersion == n.ResourceVersion {
				return // a resync, not a change
			}
			signal()
		},
		DeleteFunc: func(any) { signal() },
	}
	synced := make([]cache.InformerSynced, 0, len(servedAPISources))
	for _, gvr := range servedAPISources {
		inf := m.apiFactory.ForResource(gvr).Informer()
		_, _ = inf.AddEventHandler(handler)
		synced = append(synced, inf.HasSynced)
	}
	m.apiFactory.Start(ctx.Done())
	go func() {
		// Until the first lists arrive (a member unreachable at connect time, or credentials
		// that may not list CRDs), changes are unseen: discovery keeps the short interval.
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		m.apisWatched.Store(true)
		signal() // changes between the last discovery read and the first list
	}()
}
