// Package install puts Flotilla's control plane into a Kubernetes API server and takes it out
// again: the objects of config/install.yaml (namespace, CRDs, admission policies, roles, the
// controller-manager's ServiceAccount and, in the hosted layout, its Deployment), applied with
// server-side apply only after a server-side dry run of every one passed, so a refused object
// leaves nothing applied. `flotilla install`, `flotilla uninstall` and `flotilla up` use it.
//
// It never touches user objects: templates, policies, Clusters and their Secrets stay through
// an upgrade and an uninstall, unless the uninstall is told to purge.
package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-dev/flotilla/config"
)

// Layout says where the controller-manager runs.
type Layout string

const (
	// Hosted: the control plane is the hosting cluster's own API server and the manager runs
	// there as a Deployment (like Open Cluster Management's hub).
	Hosted Layout = "hosted"
	// Dedicated: the control plane is an API server and etcd of its own that runs no
	// workloads; the manager runs elsewhere with a kubeconfig for its ServiceAccount (like
	// Karmada's). `flotilla up` is this layout.
	Dedicated Layout = "dedicated"
)

const (
	// FieldManager owns every field install writes.
	FieldManager = "flotilla-install"
	// VersionAnnotation records, on every installed object, the version that wrote it.
	VersionAnnotation = "flotilla.dev/version"
	// Namespace is where the controller-manager and the members' credentials live.
	Namespace = "flotilla-system"
	// ManagerServiceAccount is the controller-manager's identity in the control plane.
	ManagerServiceAccount = "flotilla-controller-manager"
	// ManagerDeployment runs the controller-manager in the hosted layout.
	ManagerDeployment = "flotilla-controller-manager"
	// ImageRepository is where released manager images are published.
	ImageRepository = "ghcr.io/flotilla-dev/flotilla-controller-manager"
)

// Options say what to install.
type Options struct {
	// Layout is Hosted unless told; Dedicated leaves out the Deployment and what serves it.
	Layout Layout
	// Image of the controller-manager; the released image of Version when empty.
	Image string
	// Version written on every object; this binary's when empty.
	Version string
	// Force installs over a newer version, or replaces a Deployment another tool made.
	Force bool
	// ManagerArgs are added to the hosted manager's arguments (--history-dsn=postgres://...);
	// a later one of the same flag wins over the base's.
	ManagerArgs []string
	// Replicas of the hosted manager; 0 keeps the base's 2.
	Replicas int
	// Shard splits the member clusters between the hosted manager's replicas (each its pod,
	// serving the others on ShardPort with a certificate it issues itself).
	Shard bool
}

// ShardPort is where a sharded hosted replica serves the leader's Works to the others.
const ShardPort = 9443

// maxReplicas bounds --manager-replicas: the shard ring is read by every replica every 2 s.
const maxReplicas = 16

// Version is this binary's module version: a release tag, a pseudo-version, or "(devel)".
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// DefaultImage is the published image of version: its tag for a release, else latest.
func DefaultImage(version string) string {
	if semver.IsValid(version) && semver.Prerelease(version) == "" && semver.Build(version) == "" {
		return ImageRepository + ":" + version
	}
	return ImageRepository + ":latest"
}

func (o Options) withDefaults() Options {
	if o.Layout == "" {
		o.Layout = Hosted
	}
	if o.Version == "" {
		o.Version = Version()
	}
	if o.Image == "" {
		o.Image = DefaultImage(o.Version)
	}
	return o
}

// servesTheManager are the kinds only the hosted layout installs: the manager's Deployment and
// what exists for its pods.
var servesTheManager = map[string]bool{"Deployment": true, "PodDisruptionBudget": true, "Service": true, "NetworkPolicy": true}

// Objects are the objects to apply, in apply order (kustomize's: namespace and CRDs first),
// with the image and version set.
func Objects(o Options) ([]*unstructured.Unstructured, error) {
	o = o.withDefaults()
	switch o.Layout {
	case Hosted, Dedicated:
	default:
		return nil, fmt.Errorf("--layout %q: use hosted (the manager runs as a Deployment in this cluster) or dedicated (this API server only holds Flotilla's objects; the manager runs elsewhere)", o.Layout)
	}
	if err := checkImage(o.Image); err != nil {
		return nil, err
	}
	if o.Replicas < 0 || o.Replicas > maxReplicas {
		return nil, fmt.Errorf("--manager-replicas %d: give 1 to %d (0 keeps the default of 2)", o.Replicas, maxReplicas)
	}
	if o.Layout == Dedicated && (o.Shard || o.Replicas != 0) {
		return nil, errors.New("--shard and --manager-replicas are for --layout hosted: with dedicated you start the replicas yourself, each with --shard-identity (docs/install.md, A sharded controller-manager)")
	}
	for _, a := range o.ManagerArgs {
		if !strings.HasPrefix(a, "--") || strings.ContainsAny(a, "\n") {
			return nil, fmt.Errorf("--manager-arg %q: give one controller-manager flag with its value, e.g. --manager-arg=--history-dsn=postgres://flotilla@db/flotilla", a)
		}
	}
	all, err := decode(config.Install)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, u := range all {
		if o.Layout == Dedicated && servesTheManager[u.GetKind()] {
			continue
		}
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[VersionAnnotation] = o.Version
		u.SetAnnotations(a)
		if u.GetKind() == "Deployment" && u.GetName() == ManagerDeployment {
			if err := setContainer(u, o.Image, o.Shard, o.ManagerArgs); err != nil {
				return nil, err
			}
			if o.Replicas != 0 {
				if err := unstructured.SetNestedField(u.Object, int64(o.Replicas), "spec", "replicas"); err != nil {
					return nil, err
				}
			}
		}
		if u.GetKind() == "NetworkPolicy" && u.GetName() == ManagerDeployment && o.Shard {
			if err := letReplicasIn(u); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func checkImage(image string) error {
	if image == "" || strings.ContainsAny(image, " \t\n") || strings.HasPrefix(image, "-") {
		return fmt.Errorf("--image %q: give an image reference such as registry.example.com/flotilla-controller-manager:v1.2.3 (make image builds one)", image)
	}
	return nil
}

func setContainer(u *unstructured.Unstructured, image string, shard bool, extraArgs []string) error {
	containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return fmt.Errorf("deployment %s has no containers: config/install.yaml is broken", u.GetName())
	}
	c := containers[0].(map[string]any)
	c["image"] = image
	args, _ := c["args"].([]any)
	if shard {
		// Each pod is a replica named after itself; the kubelet fills in $(VAR) from env.
		args = append(args, "--shard-identity=$(POD_NAME)", fmt.Sprintf("--shard-address=$(POD_IP):%d", ShardPort),
			fmt.Sprintf("--inventory-bind-address=:%d", ShardPort))
		env, _ := c["env"].([]any)
		c["env"] = append(env,
			map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
			map[string]any{"name": "POD_IP", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "status.podIP"}}})
		ports, _ := c["ports"].([]any)
		c["ports"] = append(ports, map[string]any{"name": "shard", "containerPort": int64(ShardPort), "protocol": "TCP"})
	}
	for _, a := range extraArgs {
		args = append(args, a)
	}
	c["args"] = args
	containers[0] = c
	return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
}

// letReplicasIn opens the shard port of the manager's NetworkPolicy to the manager's own pods.
func letReplicasIn(u *unstructured.Unstructured) error {
	ingress, _, err := unstructured.NestedSlice(u.Object, "spec", "ingress")
	if err != nil {
		return err
	}
	ingress = append(ingress, map[string]any{
		"from":  []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": ManagerDeployment}}}},
		"ports": []any{map[string]any{"port": int64(ShardPort), "protocol": "TCP"}},
	})
	return unstructured.SetNestedSlice(u.Object, ingress, "spec", "ingress")
}

// YAML is the objects as one multi-document YAML (install --export).
func YAML(objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	for _, u := range objs {
		data, err := yamlOf(u)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding config/install.yaml: %w", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// ref names an object the way kubectl prints it: kind.group/name.
func ref(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	if u.GetNamespace() != "" {
		return kind + "/" + u.GetName() + " -n " + u.GetNamespace()
	}
	return kind + "/" + u.GetName()
}

func isCRD(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().GroupKind() == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// whoAmI names the caller for an error about rights; empty when the server will not say.
func (t *target) whoAmI(ctx context.Context) string {
	r, err := t.kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}

// resource returns the client of u's kind, in u's namespace when the kind has one.
func (t *target) resource(u *unstructured.Unstructured) (resourceClient, error) {
	gvk := u.GroupVersionKind()
	m, err := t.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: the API server does not serve %s: %w", ref(u), gvk.GroupVersion(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return t.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return t.dyn.Resource(m.Resource), nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func since(start time.Time) string { return time.Since(start).Round(100 * time.Millisecond).String() }
