// Package names holds the names, finalizers, labels, annotations and condition types that more
// than one part of Flotilla reads or writes, so no controller has to import another to learn
// them. It owns no behaviour beyond deriving a name; it must not import any controller.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Finalizers.
const (
	// BindingFinalizer holds a binding until its Works are gone; the binding controller owns it.
	BindingFinalizer = "work.flotilla.dev/binding"
	// ExecutorFinalizer holds a Work until its member objects are removed (or orphaned).
	ExecutorFinalizer = "work.flotilla.dev/executor"
)

// Annotations and taints.
const (
	// PodSecurityLevelAnnotation on a Work is the Pod Security level its objects' namespace
	// enforces in the member when the executor creates that namespace. The binding controller
	// sets it on Works of templates placed by namespaced PropagationPolicies (the platform's
	// --pod-security-level); an existing member namespace is never relabelled.
	PodSecurityLevelAnnotation = "work.flotilla.dev/pod-security-level"
	// UnreachableTaintKey marks a cluster that stayed not Ready past the grace period.
	UnreachableTaintKey = "cluster.flotilla.dev/unreachable"
)

// Labels on the policies the targeting controller generates for an Application, naming it; the
// historian reads them to say a placement came from the Application's target policies.
const (
	GeneratedAppNameLabel      = "apps.flotilla.dev/application"
	GeneratedAppNamespaceLabel = "apps.flotilla.dev/application-namespace"
)

// Condition types written by one controller and read by others.
const (
	// ConditionPropagated on the status of a workload template that no policy places: False,
	// naming why.
	ConditionPropagated = "Propagated"
)

// Binding is the name of a template's binding: NAME-KIND, like the objects it places.
func Binding(kind, name string) string {
	n := name + "-" + strings.ToLower(kind)
	if len(n) > 253 {
		sum := sha256.Sum256([]byte(n))
		n = n[:240] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return n
}
