package kube

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Runnable is fn as a manager runnable that runs on the leader only or on every replica.
func Runnable(fn func(context.Context) error, leaderOnly bool) manager.Runnable {
	return runnable{fn: fn, leaderOnly: leaderOnly}
}

type runnable struct {
	fn         func(context.Context) error
	leaderOnly bool
}

func (r runnable) Start(ctx context.Context) error { return r.fn(ctx) }
func (r runnable) NeedLeaderElection() bool        { return r.leaderOnly }
