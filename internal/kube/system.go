package kube

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var systemNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "flotilla-system": true}

// Kinds that describe the control plane itself and mean nothing in a member.
var systemKinds = map[string]bool{
	"Event": true, "Lease": true, "Endpoints": true, "EndpointSlice": true, "ControllerRevision": true,
	"Node": true, "APIService": true, "CertificateSigningRequest": true, "ComponentStatus": true,
	"TokenReview": true, "SubjectAccessReview": true, "SelfSubjectAccessReview": true,
}

// IsSystemObject reports control-plane objects that are never propagated, whatever a policy
// selects: system namespaces, service-account tokens, the root CA ConfigMap, the default
// ServiceAccount, events, leases and endpoints; of cluster-scoped kinds, the system namespaces
// themselves and execution namespaces, the "system:" RBAC objects, nodes and API services.
func IsSystemObject(u *unstructured.Unstructured) bool {
	ns := u.GetNamespace()
	if ns == "" && u.GetKind() == "Namespace" {
		ns = u.GetName()
	}
	if systemNamespaces[ns] || strings.HasPrefix(ns, ExecutionNamespacePrefix) || systemKinds[u.GetKind()] {
		return true
	}
	switch u.GetKind() {
	case "ConfigMap":
		return u.GetName() == "kube-root-ca.crt"
	case "Secret":
		t, _, _ := unstructured.NestedString(u.Object, "type")
		return t == "kubernetes.io/service-account-token"
	case "ServiceAccount":
		return u.GetName() == "default"
	case "Namespace":
		return ns == "default"
	case "ClusterRole", "ClusterRoleBinding":
		return strings.HasPrefix(u.GetName(), "system:")
	}
	return false
}
