// Package kube holds the Kubernetes plumbing every part of the binary shares: the scheme of
// the APIs Flotilla speaks and the loading of kubeconfigs. It owns no controller and no state.
package kube

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Scheme knows the built-in Kubernetes types and Flotilla's APIs.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(clusterv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(workv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(rolloutv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(configv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(appsv1alpha1.AddToScheme(Scheme))
}

// FieldManager is the server-side-apply field manager of every write Flotilla makes.
const FieldManager = "flotilla"

// SystemNamespace is the control-plane namespace of Flotilla's own objects.
const SystemNamespace = "flotilla-system"

// RESTConfig loads a REST config from a kubeconfig path and context, with the same rules as
// kubectl (empty path: $KUBECONFIG, then ~/.kube/config).
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}
