package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestBusyTellsOverloadFromMistakes(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, err := range []error{
		apierrors.NewTimeoutError("request timed out", 1),
		apierrors.NewTooManyRequests("slow down", 1),
		apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		apierrors.NewServiceUnavailable("starting"),
		apierrors.NewServerTimeout(gr, "patch", 1),
		fmt.Errorf("applying: %w", context.DeadlineExceeded),
		&url.Error{Op: "Delete", URL: "https://127.0.0.1:6443/apis/apps/v1/namespaces/a/deployments", Err: http2.StreamError{StreamID: 5065, Code: http2.ErrCodeInternal}},
	} {
		if !Busy(err) {
			t.Errorf("%v: not taken for a busy server", err)
		}
	}
	for _, err := range []error{
		nil,
		apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", nil),
		apierrors.NewForbidden(gr, "web", errors.New("no")),
		apierrors.NewNotFound(gr, "web"),
		apierrors.NewConflict(gr, "web", errors.New("changed")),
		errors.New("manifest 0: no kind"),
	} {
		if Busy(err) {
			t.Errorf("%v: taken for a busy server", err)
		}
	}
}

func TestBusyBackoffDoublesToTenSeconds(t *testing.T) {
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for n, w := range want {
		if got := BusyBackoff(n); got != w {
			t.Errorf("try %d: %s, want %s", n, got, w)
		}
	}
}
