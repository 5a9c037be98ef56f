package clustercache

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func fakeMemberDiscovery(withCRD bool) *fakediscovery.FakeDiscovery {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"get"}}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"get"}}}},
	}
	if withCRD {
		addCRD(d)
	}
	return d
}

func addCRD(d *fakediscovery.FakeDiscovery) {
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "shop.example/v1",
		APIResources: []metav1.APIResource{{Name: "carts", Kind: "Cart", Namespaced: true, Verbs: []string{"get"}}}})
}

// Members serving the same APIs share one mapper; a member with a CRD more has its own, and
// once the others install the CRD (a Reset after an unknown kind) they share that one.
func TestMembersServingTheSameAPIsShareOneMapper(t *testing.T) {
	pool := newMapperPool()
	east := &memberMapper{pool: pool, discovery: fakeMemberDiscovery(false)}
	west := &memberMapper{pool: pool, discovery: fakeMemberDiscovery(false)}
	shop := &memberMapper{pool: pool, discovery: fakeMemberDiscovery(true)}
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	cart := schema.GroupKind{Group: "shop.example", Kind: "Cart"}
	for _, m := range []*memberMapper{east, west, shop} {
		mapping, err := m.RESTMapping(deployment, "v1")
		if err != nil || mapping.Resource.Resource != "deployments" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("Deployment: %+v, %v", mapping, err)
		}
	}
	if east.current != west.current || east.current == shop.current || pool.size() != 2 {
		t.Fatalf("want east and west on one mapper and shop on its own; pool holds %d", pool.size())
	}
	if _, err := east.RESTMapping(cart, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("east maps a kind it does not serve: %v", err)
	}
	if m, err := shop.RESTMapping(cart, "v1"); err != nil || m.Resource.Resource != "carts" {
		t.Fatalf("shop's Cart: %+v, %v", m, err)
	}
	addCRD(east.discovery.(*fakediscovery.FakeDiscovery))
	east.Reset()
	if m, err := east.RESTMapping(cart, "v1"); err != nil || m.Resource.Resource != "carts" {
		t.Fatalf("east's Cart after the CRD and a reset: %+v, %v", m, err)
	}
	if east.current != shop.current {
		t.Fatal("east, now serving what shop serves, does not share shop's mapper")
	}
}
