package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/interpret"
)

func mustObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRenderStripsControlPlaneFieldsAndSetsShare(t *testing.T) {
	tmpl := mustObj(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 1234
  resourceVersion: "99"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
  ownerReferences: [{apiVersion: v1, kind: X, name: y, uid: z}]
  finalizers: [cp.example/finalizer]
  labels: {app: web}
  annotations: {deployment.kubernetes.io/revision: "3", team: payments}
spec:
  replicas: 10
  template: {spec: {containers: [{name: app, image: web:1}]}}
status: {replicas: 10}
`)
	got, err := Render(tmpl, interpret.Builtin(tmpl.GroupVersionKind().GroupKind()), Target{Replicas: 4, HasReplicas: true, WorkNamespace: "flotilla-es-east", WorkName: "shop-web-deployment"})
	if err != nil {
		t.Fatal(err)
	}
	want := mustObj(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web, work.flotilla.dev/managed-by: flotilla}
  annotations: {team: payments, work.flotilla.dev/work-namespace: flotilla-es-east, work.flotilla.dev/work-name: shop-web-deployment}
spec:
  replicas: 4
  template: {spec: {containers: [{name: app, image: web:1}]}}
`)
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}
	if r, _, _ := unstructured.NestedInt64(tmpl.Object, "spec", "replicas"); r != 10 {
		t.Errorf("the template was changed: replicas %d", r)
	}
}

func TestRenderServiceAndJobDropControlPlaneAllocations(t *testing.T) {
	svc := mustObj(t, `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {clusterIP: 10.96.0.12, clusterIPs: [10.96.0.12], ports: [{port: 80}]}
`)
	got, err := Render(svc, interpret.Builtin(svc.GroupVersionKind().GroupKind()), Target{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "clusterIP"); found {
		t.Error("clusterIP must be left to the member")
	}
	headless := mustObj(t, `
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {clusterIP: None}
`)
	got, _ = Render(headless, interpret.Builtin(headless.GroupVersionKind().GroupKind()), Target{})
	if ip, _, _ := unstructured.NestedString(got.Object, "spec", "clusterIP"); ip != "None" {
		t.Error("a headless Service keeps clusterIP None")
	}
	job := mustObj(t, `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: abc}}
  template: {metadata: {labels: {app: migrate, batch.kubernetes.io/controller-uid: abc, controller-uid: abc, job-name: migrate}}, spec: {restartPolicy: Never}}
`)
	got, _ = Render(job, interpret.Builtin(job.GroupVersionKind().GroupKind()), Target{})
	labels, _, _ := unstructured.NestedStringMap(got.Object, "spec", "template", "metadata", "labels")
	if diff := cmp.Diff(map[string]string{"app": "migrate"}, labels); diff != "" {
		t.Errorf("job template labels (-want +got):\n%s", diff)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "selector"); found {
		t.Error("a Job's generated selector must be left to the member")
	}
}
