package analysis

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

func TestEgressCheck(t *testing.T) {
	allowMetadata := NewEgress([]netip.Prefix{netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("10.20.0.0/16")})
	tests := []struct {
		addr      string
		egress    *Egress
		platform  bool
		wantError string // "" allows
	}{
		{addr: "93.184.216.34", egress: defaultEgress},
		{addr: "2606:2800:220:1::1", egress: defaultEgress},
		{addr: "127.0.0.1", egress: defaultEgress, wantError: "127.0.0.1 is loopback: an AnalysisTemplate of a namespace may not reach it; use a ClusterAnalysisTemplate"},
		{addr: "::1", egress: defaultEgress, wantError: "is loopback"},
		{addr: "::ffff:127.0.0.1", egress: defaultEgress, wantError: "127.0.0.1 is loopback"},
		{addr: "10.0.0.5", egress: defaultEgress, wantError: "10.0.0.5 is private"},
		{addr: "172.16.3.4", egress: defaultEgress, wantError: "is private"},
		{addr: "192.168.1.1", egress: defaultEgress, wantError: "is private"},
		{addr: "100.64.0.1", egress: defaultEgress, wantError: "is private"},
		{addr: "fd12::1", egress: defaultEgress, wantError: "is private"},
		{addr: "169.254.169.254", egress: defaultEgress, wantError: "169.254.169.254 is a cloud metadata address: analysis may not reach it unless the platform allows the range with the controller's --analysis-allow-cidr"},
		{addr: "169.254.1.1", egress: defaultEgress, wantError: "is link-local"},
		{addr: "fe80::1", egress: defaultEgress, wantError: "is link-local"},
		{addr: "fd00:ec2::254", egress: defaultEgress, platform: true, wantError: "cloud metadata"},
		{addr: "100.100.100.200", egress: defaultEgress, platform: true, wantError: "cloud metadata"},
		{addr: "0.0.0.0", egress: defaultEgress, platform: true, wantError: "is unspecified"},
		{addr: "::", egress: defaultEgress, platform: true, wantError: "is unspecified"},
		{addr: "224.0.0.1", egress: defaultEgress, platform: true, wantError: "is multicast"},
		{addr: "ff02::1", egress: defaultEgress, platform: true, wantError: "multicast"},
		{addr: "255.255.255.255", egress: defaultEgress, platform: true, wantError: "is reserved"},
		// A ClusterAnalysisTemplate is the platform's: private and loopback, never metadata.
		{addr: "127.0.0.1", egress: defaultEgress, platform: true},
		{addr: "10.0.0.5", egress: defaultEgress, platform: true},
		{addr: "169.254.169.254", egress: defaultEgress, platform: true, wantError: "cloud metadata"},
		{addr: "169.254.1.1", egress: defaultEgress, platform: true, wantError: "link-local"},
		// --analysis-allow-cidr opens its ranges to every template.
		{addr: "169.254.169.254", egress: allowMetadata},
		{addr: "10.20.1.1", egress: allowMetadata},
		{addr: "10.21.1.1", egress: allowMetadata, wantError: "is private"},
		{addr: "127.0.0.1", egress: allowMetadata, wantError: "is loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := tt.egress.Check(netip.MustParseAddr(tt.addr), tt.platform)
			switch {
			case tt.wantError == "" && err != nil:
				t.Errorf("Check(%s, platform=%t) = %v, want allowed", tt.addr, tt.platform, err)
			case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
				t.Errorf("Check(%s, platform=%t) = %v, want an error containing %q", tt.addr, tt.platform, err, tt.wantError)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings([]string{"127.0.0.1/32", "10.0.0.0/8,fd00::/8"}, "baseline")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.AllowCIDRs) != 3 || s.PodSecurity != "baseline" {
		t.Errorf("settings = %+v", s)
	}
	for _, tt := range []struct {
		cidrs            []string
		level, wantError string
	}{
		{cidrs: []string{"127.0.0.1"}, level: "restricted", wantError: `--analysis-allow-cidr "127.0.0.1": not a CIDR; write it like 10.0.0.0/8 or 127.0.0.1/32`},
		{level: "strict", wantError: `--analysis-pod-security-level "strict": use privileged, baseline or restricted`},
	} {
		if _, err := ParseSettings(tt.cidrs, tt.level); err == nil || err.Error() != tt.wantError {
			t.Errorf("ParseSettings(%v, %s) = %v, want %q", tt.cidrs, tt.level, err, tt.wantError)
		}
	}
}

func TestWebProviderEgress(t *testing.T) {
	target, targetCalls := analysistest.CountingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"ok":true}`) })
	// localhost resolves to the same server as 127.0.0.1 but is another host.
	otherHost := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	srv, _ := analysistest.CountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, `{"ok":true,"secret":"`+strings.Repeat("s", 4096)+`"}`)
		case "/hop1":
			http.Redirect(w, r, "/hop2", http.StatusFound)
		case "/hop2":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, otherHost+"/ok", http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
		case "/big":
			_, _ = io.WriteString(w, `{"ok":"`+strings.Repeat("x", 2<<20)+`"}`)
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"token":"TOPSECRET"}`)
		case "/html":
			_, _ = io.WriteString(w, `TOPSECRET`)
		}
	})
	tests := []struct {
		name      string
		provider  *WebProvider
		url       string
		want      any
		wantError string
		notInErr  string
	}{
		{name: "loopback refused to a namespace's template", provider: &WebProvider{}, url: target.URL + "/ok",
			wantError: "127.0.0.1 is loopback: an AnalysisTemplate of a namespace may not reach it"},
		{name: "a name is checked by the address it resolves to", provider: &WebProvider{}, url: otherHost + "/ok",
			wantError: "is loopback"},
		{name: "loopback allowed to a ClusterAnalysisTemplate", provider: &WebProvider{Platform: true}, url: target.URL + "/ok", want: true},
		{name: "metadata refused even to the platform", provider: &WebProvider{Platform: true}, url: "http://169.254.169.254/latest/meta-data",
			wantError: "169.254.169.254 is a cloud metadata address"},
		{name: "private refused", provider: &WebProvider{}, url: "http://10.1.2.3:2379/v3/kv/range", wantError: "10.1.2.3 is private"},
		{name: "file scheme", provider: &WebProvider{Egress: testLoopback}, url: "file:///etc/passwd",
			wantError: `provider.web.url: scheme "file" is not allowed; use http or https`},
		{name: "gopher scheme", provider: &WebProvider{Egress: testLoopback}, url: "gopher://127.0.0.1:70/_x",
			wantError: `provider.web.url: scheme "gopher" is not allowed; use http or https`},
		{name: "no scheme", provider: &WebProvider{Egress: testLoopback}, url: "/etc/passwd", wantError: "provider.web.url: no scheme"},
		{name: "same-host redirects are followed", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/hop1", want: true},
		{name: "at most 3 redirects", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/loop", wantError: "more than 3 redirects"},
		{name: "no redirect to another host", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/elsewhere",
			wantError: "analysis follows redirects only within the same host"},
		{name: "no redirect to metadata", provider: &WebProvider{Egress: testLoopback, Platform: true}, url: srv.URL + "/metadata",
			wantError: "only within the same host"},
		{name: "at most 1 MiB is read", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/big",
			wantError: "the answer is larger than 1048576 bytes (1 MiB)"},
		{name: "an error answer's body is not shown", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/fail",
			wantError: "answered 500 Internal Server Error", notInErr: "TOPSECRET"},
		{name: "a body that is not JSON is not shown", provider: &WebProvider{Egress: testLoopback}, url: srv.URL + "/html",
			wantError: "is not JSON", notInErr: "TOPSECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := tt.provider.Measure(context.Background(), analysistest.RunWithArgs(nil), analysistest.WebPathMetric(tt.url))
			if tt.wantError == "" {
				if err != nil || got != tt.want {
					t.Errorf("Measure = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantError)
			}
			if tt.notInErr != "" && strings.Contains(err.Error(), tt.notInErr) {
				t.Errorf("error %q repeats the answer's body", err)
			}
		})
	}
	if n := targetCalls.Load(); n != 1 {
		t.Errorf("the target server got %d requests, want 1 (only the ClusterAnalysisTemplate's)", n)
	}

	t.Run("the measurement keeps only the bounded result", func(t *testing.T) {
		metric := rolloutv1alpha1.Metric{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL + "/ok"}}}
		o := TakeMeasurement(context.Background(), &WebProvider{Egress: testLoopback}, analysistest.RunWithArgs(nil), metric, t0)
		result, _ := Record(metric, rolloutv1alpha1.MetricResult{Name: "m"}, o, t0, t0, 0)
		if v := result.Measurements[0].Value; len(v) > maxValueLength+len("…") {
			t.Errorf("recorded value is %d bytes, want at most %d", len(v), maxValueLength)
		}
	})
}

func TestPrometheusProviderEgress(t *testing.T) {
	prom, calls := fakePrometheus(t)
	defer prom.Close()
	srv, _ := analysistest.CountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere/api/v1/query":
			http.Redirect(w, r, strings.Replace(prom.URL, "127.0.0.1", "localhost", 1)+"/api/v1/query", http.StatusTemporaryRedirect)
		case "/big/api/v1/query":
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"`+strings.Repeat("1", 2<<20)+`"]}}`)
		case "/down/api/v1/query":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `TOPSECRET`)
		}
	})
	metric := func(address string) rolloutv1alpha1.Metric {
		return rolloutv1alpha1.Metric{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: address, Query: "scalar"}}}
	}
	tests := []struct {
		name      string
		provider  *PrometheusProvider
		address   string
		wantError string
		notInErr  string
	}{
		{name: "loopback refused to a namespace's template", provider: &PrometheusProvider{}, address: prom.URL, wantError: "127.0.0.1 is loopback"},
		{name: "loopback allowed to a ClusterAnalysisTemplate", provider: &PrometheusProvider{Platform: true}, address: prom.URL},
		{name: "file scheme", provider: &PrometheusProvider{Egress: testLoopback}, address: "file:///etc/passwd",
			wantError: `provider.prometheus.address: scheme "file" is not allowed; use http or https`},
		{name: "no redirect to another host", provider: &PrometheusProvider{Egress: testLoopback}, address: srv.URL + "/elsewhere", wantError: "only within the same host"},
		{name: "at most 1 MiB is read", provider: &PrometheusProvider{Egress: testLoopback}, address: srv.URL + "/big", wantError: "larger than 1048576 bytes"},
		{name: "an error answer's body is not shown", provider: &PrometheusProvider{Egress: testLoopback}, address: srv.URL + "/down", wantError: "server error: 502", notInErr: "TOPSECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := tt.provider.Measure(context.Background(), analysistest.RunWithArgs(nil), metric(tt.address))
			if tt.wantError == "" {
				if err != nil {
					t.Errorf("Measure: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantError)
			}
			if tt.notInErr != "" && strings.Contains(err.Error(), tt.notInErr) {
				t.Errorf("error %q repeats the answer's body", err)
			}
		})
	}
	if n := len(calls()); n != 1 {
		t.Errorf("prometheus got %d queries, want 1 (only the ClusterAnalysisTemplate's)", n)
	}
}

func TestLiteralSchemeIsRefused(t *testing.T) {
	tests := []struct {
		url       string
		wantError string
	}{
		{url: "http://prometheus:9090"},
		{url: "HTTPS://prometheus:9090"},
		{url: "{{args.base}}/health"},
		{url: "file:///etc/passwd", wantError: `metrics[0].provider.web.url: scheme "file" is not allowed; use http or https`},
		{url: "Gopher://x:70/", wantError: `scheme "gopher" is not allowed`},
	}
	for _, tt := range tests {
		err := ValidateMetrics([]rolloutv1alpha1.Metric{analysistest.WebPathMetric(tt.url)})
		if tt.wantError == "" && err != nil || tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)) {
			t.Errorf("ValidateMetrics(%s) = %v, want %q", tt.url, err, tt.wantError)
		}
	}
}
