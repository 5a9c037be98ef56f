package manager

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// Outside the local fleet the controller-manager listens on loopback only, and metrics
// reachable from beyond the host need an authenticated, authorized client.
func TestMetricsAndHealthDefaults(t *testing.T) {
	o := DefaultOptions()
	for name, addr := range map[string]string{"metrics": o.MetricsAddress, "health": o.HealthProbeAddress} {
		if !isLoopback(addr) {
			t.Errorf("default %s address %q is not loopback", name, addr)
		}
	}
	if o.PodSecurityLevel != "baseline" {
		t.Errorf("default PodSecurityLevel = %q, want baseline", o.PodSecurityLevel)
	}
	yes, no := true, false
	for _, tc := range []struct {
		address    string
		secure     *bool
		wantSecure bool
	}{
		{"127.0.0.1:8080", nil, false},
		{"localhost:8080", nil, false},
		{"[::1]:8080", nil, false},
		{":8080", nil, true},
		{"0.0.0.0:8080", nil, true},
		{"10.0.0.5:8080", nil, true},
		{":8080", &no, false},
		{"127.0.0.1:8080", &yes, true},
		{"0", nil, false}, // metrics off
	} {
		o := DefaultOptions()
		o.MetricsAddress, o.MetricsSecure = tc.address, tc.secure
		got, err := o.metricsServerOptions()
		if err != nil {
			t.Fatalf("%s: %v", tc.address, err)
		}
		if got.BindAddress != tc.address || got.SecureServing != tc.wantSecure || (got.FilterProvider != nil) != tc.wantSecure {
			t.Errorf("%s (secure %v): BindAddress %q, SecureServing %v, filter %v; want secure %v", tc.address, tc.secure, got.BindAddress, got.SecureServing, got.FilterProvider != nil, tc.wantSecure)
		}
	}
}

// An unknown Pod Security level is refused before anything starts, naming the flag.
func TestRunRejectsUnknownPodSecurityLevel(t *testing.T) {
	o := DefaultOptions()
	o.PodSecurityLevel = "strict"
	err := Run(context.Background(), &rest.Config{}, o)
	if err == nil || !strings.Contains(err.Error(), "--pod-security-level") {
		t.Fatalf("error = %v, want it to name --pod-security-level", err)
	}
}

func TestRunRejectsBadTenancyFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"exempt namespace not a name", func(o *Options) { o.PodSecurityExemptNamespaces = []string{"Kube System"} }, "--pod-security-exempt-namespaces"},
		{"exec plugin with a path", func(o *Options) { o.AllowExecPlugins = []string{"/bin/sh"} }, "--allow-exec-plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.set(&o)
			err := Run(context.Background(), &rest.Config{}, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to name %s", err, tc.want)
			}
		})
	}
}
