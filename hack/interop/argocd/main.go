// Command argocd-check runs Argo CD's own health assessment and diff (its gitops-engine
// module) on objects of a Kubernetes API server, so the e2e suite can show what Argo CD would
// say of the control plane's templates. It is test tooling, built by `make tools`, and is not
// part of Flotilla.
//
//	argocd-check health --kubeconfig K -n NS KIND/NAME
//	argocd-check diff --kubeconfig K -f desired.yaml
//
// Both print one JSON object.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/diff"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/health"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: argocd-check health|diff [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := fs.String("n", "default", "namespace")
	file := fs.String("f", "", "desired manifest (diff)")
	_ = fs.Parse(os.Args[2:])
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err.Error())
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		fail(err.Error())
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fail(err.Error())
	}
	get := func(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			fail(err.Error())
		}
		ri := dyn.Resource(m.Resource)
		var u *unstructured.Unstructured
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			u, err = ri.Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		} else {
			u, err = ri.Get(context.Background(), name, metav1.GetOptions{})
		}
		if err != nil {
			fail(err.Error())
		}
		return u
	}
	switch os.Args[1] {
	case "health":
		kind, name, ok := strings.Cut(fs.Arg(0), "/")
		if !ok {
			fail("health: give KIND/NAME")
		}
		gvk, err := mapper.KindFor(schema.GroupVersionResource{Resource: strings.ToLower(kind)})
		if err != nil {
			fail(err.Error())
		}
		h, err := health.GetResourceHealth(get(gvk, *namespace, name), nil)
		if err != nil {
			fail(err.Error())
		}
		out := map[string]string{"status": "", "message": ""}
		if h != nil { // nil: Argo CD has no health rule for the kind
			out["status"], out["message"] = string(h.Status), h.Message
		}
		print(out)
	case "diff":
		data, err := os.ReadFile(*file)
		if err != nil {
			fail(err.Error())
		}
		config := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &config.Object); err != nil {
			fail(err.Error())
		}
		ns := config.GetNamespace()
		if ns == "" {
			ns = *namespace
		}
		live := get(config.GroupVersionKind(), ns, config.GetName())
		res, err := diff.Diff(context.Background(), config, live, diff.WithNormalizer(diff.GetNoopNormalizer()))
		if err != nil {
			fail(err.Error())
		}
		var predicted, normalized map[string]any
		_ = json.Unmarshal(res.PredictedLive, &predicted)
		_ = json.Unmarshal(res.NormalizedLive, &normalized)
		paths := differences("", predicted, normalized)
		sort.Strings(paths)
		print(map[string]any{"modified": res.Modified, "paths": paths})
	default:
		fail("usage: argocd-check health|diff [flags]")
	}
}

// differences lists the JSON paths where a and b differ.
func differences(prefix string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for k := range keys {
		out = append(out, differences(prefix+"."+k, am[k], bm[k])...)
	}
	return out
}

func print(v any) {
	data, _ := json.Marshal(v)
	fmt.Println(string(data))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "argocd-check:", msg)
	os.Exit(1)
}
