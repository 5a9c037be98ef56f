//go:build tools

// Package tools pins the Argo Rollouts commands hack/build-tools.sh builds.
package tools

import (
	_ "github.com/argoproj/argo-rollouts/cmd/kubectl-argo-rollouts"
	_ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
)
