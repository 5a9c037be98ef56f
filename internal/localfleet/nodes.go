package localfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-dev/flotilla/config/security"
	"github.com/flotilla-dev/flotilla/internal/install"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// ensureNodes creates the member's simulated nodes (kwok manages those annotated as fake) and
// waits until kwok reports them Ready.
func (f *LocalFleet) ensureNodes(ctx context.Context, m Member) error {
	cfg, err := f.RESTConfig(m.Name)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(m.NodeCapacity.CPU),
		corev1.ResourceMemory: resource.MustParse(m.NodeCapacity.Memory),
		corev1.ResourcePods:   resource.MustParse(m.NodeCapacity.Pods),
	}
	for i := range m.Nodes {
		name := fmt.Sprintf("%s-node-%d", m.Name, i+1)
		labels := map[string]string{
			"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}
		if r := m.Labels["region"]; r != "" {
			labels["topology.kubernetes.io/region"] = r
		}
		if z := m.Labels["zone"]; z != "" {
			labels["topology.kubernetes.io/zone"] = z
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      labels,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		err := whileBusy(ctx, func() error {
			_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s in %s: %w", name, m.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 120*time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= m.Nodes, nil
	})
}

// installControlPlaneAPIs installs Flotilla into the control plane as `flotilla install
// --layout dedicated` does (CRDs, admission policies, the manager's least-privilege roles),
// and binds the fleet's manager certificate to the roles its ServiceAccount holds.
func (f *LocalFleet) installControlPlaneAPIs(ctx context.Context) error {
	cfg, err := f.RESTConfig(ControlPlaneName)
	if err != nil {
		return err
	}
	if len(f.opts.CRDs) == 0 {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", kube.SystemNamespace, err)
		}
		return nil
	}
	if _, err := install.Apply(ctx, cfg, install.ApplyOptions{Options: install.Options{Layout: install.Dedicated, Force: true}}); err != nil {
		return err
	}
	bindings, err := managerUserBindings()
	if err != nil {
		return err
	}
	return applyManifests(ctx, cfg, bindings)
}

// managerUserBindings are the install's bindings of the manager's ServiceAccount, made again
// for the fleet's manager certificate user, so both hold exactly the same roles.
func managerUserBindings() ([]byte, error) {
	objs, err := install.Objects(install.Options{Layout: install.Dedicated})
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if !strings.HasSuffix(u.GetKind(), "Binding") || u.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != install.ManagerServiceAccount {
			continue
		}
		b := u.DeepCopy()
		b.SetName(u.GetName() + ":local-fleet")
		b.SetAnnotations(nil)
		_ = unstructured.SetNestedSlice(b.Object, []any{map[string]any{"kind": rbacv1.UserKind, "apiGroup": rbacv1.GroupName, "name": security.ManagerUser}}, "subjects")
		out = append(out, b)
	}
	return install.YAML(out)
}

// applyManifests server-side applies a multi-document YAML of any kinds.
func applyManifests(ctx context.Context, cfg *rest.Config, data []byte) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decoding manifests: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("installing %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if err := whileBusy(ctx, func() error {
			_, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "flotilla-up", Force: true})
			return err
		}); err != nil {
			return fmt.Errorf("installing %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
}

// DecodeCRDs reads a multi-document YAML of CustomResourceDefinitions.
func DecodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding CRDs: %w", err)
		}
		if crd.Name != "" {
			out = append(out, crd)
		}
	}
}

// busyRetryFor bounds how long a call a busy fleet answers with a timeout is tried again.
const busyRetryFor = 2 * time.Minute

// whileBusy calls fn again, backing off, while it fails the way an overloaded apiserver or its
// etcd fails (a timeout, throttling, an internal error such as "etcdserver: request timed out",
// a dropped connection): a fleet of a hundred members starting on two cores has such moments,
// and they pass. Any other error, or the last one after busyRetryFor, is returned.
func whileBusy(ctx context.Context, fn func() error) error {
	backoff := wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 64, Cap: 10 * time.Second}
	deadline := time.Now().Add(busyRetryFor)
	for {
		err := fn()
		if err == nil || !kube.Busy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff.Step()):
		}
	}
}
