//go:build tools

// Package tools pins the binaries the local fleet and code generation run: the Kubernetes
// control-plane components and kubectl, etcd, kwok, controller-gen and applyconfiguration-gen.
// `make tools` builds them into bin/.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/code-generator/cmd/applyconfiguration-gen"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
