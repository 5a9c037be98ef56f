package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

type resourceClient = dynamic.ResourceInterface

// target is the API server install writes to.
type target struct {
	host   string
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	out    io.Writer
}

func newTarget(cfg *rest.Config, out io.Writer) (*target, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = io.Discard
	}
	return &target{
		host: cfg.Host, kube: kube, dyn: dyn, out: out,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
	}, nil
}

// Change is what apply did to one object.
type Change struct {
	Object string // kind.group/name, as kubectl prints it
	Action string // created, configured or unchanged
}

// ApplyOptions add how to apply to what to install.
type ApplyOptions struct {
	Options
	// Wait is how long to wait for the hosted manager to be Available; 0 does not wait.
	Wait time.Duration
	// Out receives one line per object and the waits; nil says nothing.
	Out io.Writer
}

// Apply installs or upgrades Flotilla in the API server of cfg. It checks the server and the
// existing install, dry-runs every object on the server, and only then applies them: CRDs
// first (waiting until they are established), then the rest. A second Apply of the same
// version changes nothing.
func Apply(ctx context.Context, cfg *rest.Config, o ApplyOptions) ([]Change, error) {
	o.Options = o.Options.withDefaults()
	objs, err := Objects(o.Options)
	if err != nil {
		return nil, err
	}
	t, err := newTarget(cfg, o.Out)
	if err != nil {
		return nil, err
	}
	if err := t.checkServer(ctx); err != nil {
		return nil, err
	}
	if o.Layout == Hosted && o.Wait > 0 {
		if err := t.checkNodes(ctx); err != nil {
			return nil, err
		}
	}
	if err := t.waitNamespaceGone(ctx); err != nil {
		return nil, err
	}
	replace, err := t.checkExisting(ctx, o.Options)
	if err != nil {
		return nil, err
	}
	createdNamespace, err := t.dryRun(ctx, objs, replace)
	if err != nil {
		if createdNamespace {
			_ = t.kube.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), Namespace, metav1.DeleteOptions{})
		}
		return nil, err
	}
	if replace != nil {
		// Replaced, not taken over: its selector may differ from ours and cannot change.
		if err := t.kube.AppsV1().Deployments(Namespace).Delete(ctx, ManagerDeployment, metav1.DeleteOptions{}); ignoreNotFound(err) != nil {
			return nil, fmt.Errorf("replacing deployment %s/%s: %w", Namespace, ManagerDeployment, err)
		}
		fmt.Fprintf(t.out, "deployment.apps/%s -n %s (managed by %s) deleted, to be replaced\n", ManagerDeployment, Namespace, managers(replace))
	}
	var changes []Change
	for i, stage := range [][]*unstructured.Unstructured{crds(objs, true), crds(objs, false)} {
		for _, u := range stage {
			c, err := t.apply(ctx, u, createdNamespace)
			if err != nil {
				return changes, err
			}
			fmt.Fprintf(t.out, "%s %s\n", c.Object, c.Action)
			changes = append(changes, c)
		}
		if i == 0 {
			if err := t.waitEstablished(ctx, stage); err != nil {
				return changes, err
			}
		}
	}
	if o.Layout == Hosted && o.Wait > 0 {
		if err := t.waitManager(ctx, o.Wait); err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// crds returns the CRDs of objs (want true) or everything else, keeping the order.
func crds(objs []*unstructured.Unstructured, want bool) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if isCRD(u) == want {
			out = append(out, u)
		}
	}
	return out
}

// checkServer refuses an API server that cannot hold the admission policies, naming the
// server's version.
func (t *target) checkServer(ctx context.Context) error {
	v, err := t.kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w; check --kubeconfig/--context", t.host, err)
	}
	resources, err := t.kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the API server's admissionregistration.k8s.io/v1 resources at %s: %w", t.host, err)
	}
	served := false
	if err == nil {
		for _, r := range resources.APIResources {
			served = served || r.Name == "validatingadmissionpolicies"
		}
	}
	if !served {
		return fmt.Errorf("the API server at %s (Kubernetes %s) does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, which Flotilla's admission policies need: use Kubernetes 1.30 or newer with that API enabled; nothing was installed", t.host, v.GitVersion)
	}
	return nil
}

// waitNamespaceGone waits for a flotilla-system that is being deleted (an uninstall --purge or
// an unjoin just now) to be gone: nothing can be created in it meanwhile.
func (t *target) waitNamespaceGone(ctx context.Context) error {
	start, said := time.Now(), false
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := t.kube.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp == nil {
			return true, nil
		}
		if !said {
			fmt.Fprintf(t.out, "waiting for namespace %s, which is being deleted, to be gone\n", Namespace)
			said = true
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s is still being deleted after %s (see kubectl get namespace %s -o yaml for what holds it); nothing was installed", Namespace, since(start), Namespace)
	}
	return nil
}

// checkNodes refuses to wait for a hosted manager in a cluster that has no node to run it on
// (a dedicated control plane, the local fleet's): its pods would wait forever. Without a wait
// (nodes joining later), the install goes ahead.
func (t *target) checkNodes(ctx context.Context) error {
	nodes, err := t.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(nodes.Items) > 0 {
		return nil // unknown (no right to list nodes) or there are some
	}
	return fmt.Errorf("the cluster at %s has no nodes to run the controller-manager on: install with --layout dedicated (and run the manager elsewhere with --manager-kubeconfig), or point --kubeconfig at the cluster that should run it; nothing was installed", t.host)
}

// checkExisting refuses to overwrite a newer Flotilla, or a manager another tool installed,
// unless forced; forced, it returns that manager's Deployment, to be replaced once the dry run
// passed.
func (t *target) checkExisting(ctx context.Context, o Options) (replace *appsv1.Deployment, err error) {
	ns, err := t.kube.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil // nothing there, or the dry run will name the missing rights
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", Namespace, err)
	}
	have := ns.Annotations[VersionAnnotation]
	if have != "" && have != o.Version && semver.IsValid(have) && semver.IsValid(o.Version) && semver.Compare(have, o.Version) > 0 && !o.Force {
		return nil, fmt.Errorf("namespace %s holds Flotilla %s, newer than this binary's %s: install with a %s binary, or pass --force to go back to %s; nothing was changed", Namespace, have, o.Version, have, o.Version)
	}
	if o.Layout == Hosted {
		d, err := t.kube.AppsV1().Deployments(Namespace).Get(ctx, ManagerDeployment, metav1.GetOptions{})
		if err == nil && d.Annotations[VersionAnnotation] == "" {
			if !o.Force {
				return nil, fmt.Errorf("namespace %s already holds a deployment %s that flotilla install did not make (managed by %s): remove it, or pass --force to replace it; nothing was changed", Namespace, ManagerDeployment, managers(d))
			}
			replace = d
		}
	}
	if have != "" && have != o.Version {
		fmt.Fprintf(t.out, "upgrading Flotilla %s to %s\n", have, o.Version)
	}
	return replace, nil
}

func managers(d *appsv1.Deployment) string {
	var names []string
	for _, f := range d.ManagedFields {
		names = append(names, f.Manager)
	}
	if len(names) == 0 {
		return "an unknown tool"
	}
	return strings.Join(names, ", ")
}

// dryRun applies every object with a server-side dry run and reports every refusal at once.
// Namespaced objects need their namespace, so a missing one is created first; the caller
// deletes it again when the dry run fails. A Deployment to be replaced is checked as new.
func (t *target) dryRun(ctx context.Context, objs []*unstructured.Unstructured, replace *appsv1.Deployment) (createdNamespace bool, err error) {
	_, err = t.kube.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		for _, u := range objs {
			if u.GetKind() == "Namespace" && u.GetName() == Namespace {
				if _, err := t.applyObject(ctx, u, false); err != nil {
					return false, t.refused(ctx, []error{fmt.Errorf("%s: %w", ref(u), err)})
				}
				createdNamespace = true
			}
		}
	}
	var errs []error
	for _, u := range objs {
		if replace != nil && u.GetKind() == "Deployment" && u.GetName() == ManagerDeployment {
			continue // its selector may be immutable against ours; it is deleted first
		}
		if ri, err := t.resource(u); err == nil {
			if live, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil && roleRefChanged(live, u) {
				continue // replaced when applied: a roleRef cannot change in place
			}
		}
		if _, err := t.applyObject(ctx, u, true); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref(u), err))
		}
	}
	if len(errs) > 0 {
		return createdNamespace, t.refused(ctx, errs)
	}
	return createdNamespace, nil
}

func (t *target) refused(ctx context.Context, errs []error) error {
	var b strings.Builder
	forbidden := false
	for _, err := range errs {
		// RBAC's denials, not other refusals that share the Forbidden status.
		forbidden = forbidden || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), " cannot "))
	}
	if forbidden {
		who := t.whoAmI(ctx)
		if who == "" {
			who = "these credentials"
		}
		fmt.Fprintf(&b, "the API server at %s refused %s the rights install needs (it writes CRDs, cluster roles and admission policies: use a cluster-admin kubeconfig); nothing was installed:", t.host, who)
	} else {
		fmt.Fprintf(&b, "the API server at %s refused the install; nothing was installed:", t.host)
	}
	for _, err := range errs {
		fmt.Fprintf(&b, "\n  - %v", err)
	}
	return errors.New(b.String())
}

func (t *target) applyObject(ctx context.Context, u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := t.resource(u)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Apply(ctx, u.GetName(), u, opts)
}

// apply applies one object and says whether it was created, changed or already so.
func (t *target) apply(ctx context.Context, u *unstructured.Unstructured, namespaceJustCreated bool) (Change, error) {
	c := Change{Object: ref(u)}
	ri, err := t.resource(u)
	if err != nil {
		return c, err
	}
	before, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return c, fmt.Errorf("%s: %w", c.Object, err)
	}
	if before != nil && roleRefChanged(before, u) {
		// A binding's roleRef cannot change: an older install's binding is replaced.
		if err := ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(before.GetUID())}}); ignoreNotFound(err) != nil {
			return c, fmt.Errorf("%s: replacing it (its role changed): %w", c.Object, err)
		}
		before = nil
	}
	after, err := t.applyObject(ctx, u, false)
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Object, err)
	}
	switch {
	case before == nil || (namespaceJustCreated && u.GetKind() == "Namespace" && u.GetName() == Namespace):
		c.Action = "created"
	case before.GetResourceVersion() == after.GetResourceVersion():
		c.Action = "unchanged"
	default:
		c.Action = "configured"
	}
	return c, nil
}

func (t *target) waitEstablished(ctx context.Context, crds []*unstructured.Unstructured) error {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, u := range crds {
			ri, err := t.resource(u)
			if err != nil {
				return false, err
			}
			got, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil || !conditionTrue(got, "Established") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the CRDs were applied but are not all established after %s: %w", since(start), err)
	}
	t.mapper.Reset()
	fmt.Fprintf(t.out, "%d CRDs established in %s\n", len(crds), since(start))
	return nil
}

// waitManager waits until the manager's Deployment is Available, saying how many replicas are.
func (t *target) waitManager(ctx context.Context, timeout time.Duration) error {
	start, last := time.Now(), ""
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := t.kube.AppsV1().Deployments(Namespace).Get(ctx, ManagerDeployment, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		line := fmt.Sprintf("waiting for deployment %s: %d of %d replicas available", ManagerDeployment, d.Status.AvailableReplicas, want)
		if line != last {
			fmt.Fprintln(t.out, line)
			last = line
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s is not available after %s (%s): see kubectl -n %s describe deployment %s and the pods' events; everything else is installed", Namespace, ManagerDeployment, since(start), last, Namespace, ManagerDeployment)
	}
	fmt.Fprintf(t.out, "deployment %s available after %s\n", ManagerDeployment, since(start))
	return nil
}

// roleRefChanged says whether a live RBAC binding refers to another role than the desired one.
func roleRefChanged(live, desired *unstructured.Unstructured) bool {
	if desired.GroupVersionKind().Group != "rbac.authorization.k8s.io" || !strings.HasSuffix(desired.GetKind(), "Binding") {
		return false
	}
	a, _, _ := unstructured.NestedMap(live.Object, "roleRef")
	b, _, _ := unstructured.NestedMap(desired.Object, "roleRef")
	return a["kind"] != b["kind"] || a["name"] != b["name"]
}

func conditionTrue(u *unstructured.Unstructured, condition string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condition && m["status"] == string(corev1.ConditionTrue) {
			return true
		}
	}
	return false
}

func yamlOf(u *unstructured.Unstructured) ([]byte, error) { return yaml.Marshal(u.Object) }
