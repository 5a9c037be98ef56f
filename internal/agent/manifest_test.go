package agent

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func TestTheAgentManifestRunsOneAgentThatKeepsItsIdentityInTheMember(t *testing.T) {
	out, err := Manifest(ManifestOptions{Cluster: "store-42", ControlPlane: "https://cp.example:8444", Token: "abcdef.0123456789abcdef0123456789abcdef",
		Image: "ghcr.io/flotilla-dev/flotilla-agent:v1.0.0", CAPEM: []byte("-----BEGIN CERTIFICATE-----\n")})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var deployment appsv1.Deployment
	var token corev1.Secret
	for _, u := range manifestObjects(t, out) {
		kinds[u.GetKind()]++
		raw, _ := yaml.Marshal(u.Object)
		switch u.GetKind() {
		case "Deployment":
			if err := yaml.UnmarshalStrict(raw, &deployment); err != nil {
				t.Fatalf("the Deployment does not decode strictly: %v", err)
			}
		case "Secret":
			if err := yaml.Unmarshal(raw, &token); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret", "ConfigMap", "Deployment"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s in the manifest, want 1 (%v)", kinds[k], k, kinds)
		}
	}
	if r := deployment.Spec.Replicas; r == nil || *r != 1 || deployment.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("the agent runs %v replicas with %q: want exactly one at a time", r, deployment.Spec.Strategy.Type)
	}
	args := strings.Join(deployment.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--cluster=store-42", "--control-plane=https://cp.example:8444", "--identity-secret=flotilla-system/flotilla-agent-identity", "--ca-file="} {
		if !strings.Contains(args, want) {
			t.Errorf("the agent's args %q lack %q", args, want)
		}
	}
	if token.StringData["token"] != "abcdef.0123456789abcdef0123456789abcdef" {
		t.Errorf("the bootstrap Secret holds %v", token.StringData)
	}
	if sc := deployment.Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the agent may escalate privileges")
	}
	if _, err := Manifest(ManifestOptions{Cluster: "store-42", ControlPlane: "http://cp.example", Token: "x", Image: "i"}); err == nil || !strings.Contains(err.Error(), "--control-plane-url") {
		t.Errorf("a plain-http control plane: %v; want refused naming --control-plane-url", err)
	}
}

// manifestObjects are the objects of a multi-document YAML manifest, in order.
func manifestObjects(t *testing.T, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the manifest does not decode: %v", err)
			}
			return objs
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
