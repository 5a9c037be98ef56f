package install

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestObjectsOfEachLayout(t *testing.T) {
	hosted, err := Objects(Options{Image: "registry.example.com/fcm:v1", Version: "v1.2.3", ManagerArgs: []string{"--history-dsn=postgres://flotilla@db/flotilla"}})
	if err != nil {
		t.Fatal(err)
	}
	dedicated, err := Objects(Options{Layout: Dedicated, Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, u := range hosted {
		count[u.GetKind()]++
		if got := u.GetAnnotations()[VersionAnnotation]; got != "v1.2.3" {
			t.Errorf("%s: version annotation %q", ref(u), got)
		}
		if u.GetKind() == "Deployment" {
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			if c["image"] != "registry.example.com/fcm:v1" {
				t.Errorf("the manager's image is %v", c["image"])
			}
			if args := asStrings(c["args"]); args[len(args)-1] != "--history-dsn=postgres://flotilla@db/flotilla" {
				t.Errorf("the manager's args end %v, want the added one last", args)
			}
		}
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment", "PodDisruptionBudget", "NetworkPolicy", "Service", "ValidatingAdmissionPolicy"} {
		if count[kind] == 0 {
			t.Errorf("the hosted layout has no %s", kind)
		}
	}
	if !isCRD(hosted[1]) || hosted[0].GetKind() != "Namespace" {
		t.Errorf("apply order starts %s, %s; want the namespace, then CRDs", ref(hosted[0]), ref(hosted[1]))
	}
	for _, u := range dedicated {
		if servesTheManager[u.GetKind()] {
			t.Errorf("the dedicated layout has %s", ref(u))
		}
	}
	if want := len(hosted) - count["Deployment"] - count["PodDisruptionBudget"] - count["NetworkPolicy"] - count["Service"]; len(dedicated) != want {
		t.Errorf("dedicated has %d objects, want %d", len(dedicated), want)
	}
}

// No rule of the manager's roles is a wildcard, and no escalating verb is granted beyond the
// named ones.
func TestManagerRolesAreLeastPrivilege(t *testing.T) {
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]string{"impersonate": "groups,users", "bind": "clusterroles"}
	seen := 0
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" || !strings.HasPrefix(u.GetName(), "flotilla:controller-manager") {
			continue
		}
		seen++
		rules, _ := u.Object["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			for _, field := range []string{"apiGroups", "resources", "verbs"} {
				for _, v := range asStrings(rule[field]) {
					if v == "*" {
						t.Errorf("%s grants * in %s: %v", ref(u), field, rule)
					}
				}
			}
			for _, verb := range asStrings(rule["verbs"]) {
				if verb == "escalate" || verb == "approve" || verb == "sign" {
					t.Errorf("%s grants %s: %v", ref(u), verb, rule)
				}
				if want, ok := allowed[verb]; ok && strings.Join(asStrings(rule["resources"]), ",") != want {
					t.Errorf("%s grants %s on %v, only on %s", ref(u), verb, rule["resources"], want)
				}
			}
			if slices.Contains(asStrings(rule["verbs"]), "bind") && len(asStrings(rule["resourceNames"])) == 0 {
				t.Errorf("%s grants bind on every role", ref(u))
			}
		}
	}
	if seen < 3 {
		t.Errorf("found %d manager roles, want the generated ClusterRole, its Role and the template roles", seen)
	}
}

// A sharded install runs each pod as a replica named after itself, serving the others on the
// shard port, which its NetworkPolicy opens to the manager's pods only; args added by the
// user come last, so they win.
func TestShardedObjects(t *testing.T) {
	objs, err := Objects(Options{Shard: true, Replicas: 3, ManagerArgs: []string{"--inventory-bind-address=:9444"}})
	if err != nil {
		t.Fatal(err)
	}
	var sawDeployment, sawPolicy bool
	for _, u := range objs {
		switch {
		case u.GetKind() == "Deployment":
			sawDeployment = true
			if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 3 {
				t.Errorf("replicas %d, want 3", r)
			}
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			args := strings.Join(asStrings(c["args"]), " ")
			if !strings.Contains(args, "--shard-identity=$(POD_NAME) --shard-address=$(POD_IP):9443 --inventory-bind-address=:9443 --inventory-bind-address=:9444") {
				t.Errorf("args %s: want the shard flags, then the user's", args)
			}
			env := fmt.Sprint(c["env"])
			if !strings.Contains(env, "POD_NAME") || !strings.Contains(env, "metadata.name") || !strings.Contains(env, "status.podIP") {
				t.Errorf("env %s: want POD_NAME and POD_IP from the downward API", env)
			}
			if !strings.Contains(fmt.Sprint(c["ports"]), "9443") {
				t.Errorf("ports %v: want the shard port", c["ports"])
			}
		case u.GetKind() == "NetworkPolicy":
			sawPolicy = true
			ingress, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
			if len(ingress) != 2 || !strings.Contains(fmt.Sprint(ingress[1]), "podSelector:map[matchLabels:map[app.kubernetes.io/name:flotilla-controller-manager]]") {
				t.Errorf("ingress %v: want the shard port open to the manager's pods only", ingress)
			}
		}
	}
	if !sawDeployment || !sawPolicy {
		t.Fatal("no Deployment or NetworkPolicy")
	}
	plain, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range plain {
		if u.GetKind() == "Deployment" && strings.Contains(fmt.Sprint(u.Object), "shard") {
			t.Errorf("an unsharded install carries shard settings: %v", u.Object)
		}
	}
}

func TestBadOptionsNameTheFlag(t *testing.T) {
	for _, o := range []Options{{Layout: "edge"}, {Image: "-x"}, {Image: "two words"}, {ManagerArgs: []string{"history-dsn=x"}},
		{Replicas: -1}, {Replicas: 17}, {Layout: Dedicated, Shard: true}} {
		_, err := Objects(o)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%+v: %v, want an error naming the flag", o, err)
		}
	}
}

func TestDefaultImage(t *testing.T) {
	for version, want := range map[string]string{
		"v0.4.0":                               ImageRepository + ":v0.4.0",
		"v0.4.1-0.20261127120000-abcdef123456": ImageRepository + ":latest",
		"(devel)":                              ImageRepository + ":latest",
	} {
		if got := DefaultImage(version); got != want {
			t.Errorf("DefaultImage(%q) = %q, want %q", version, got, want)
		}
	}
}

func asStrings(v any) []string {
	var out []string
	items, _ := v.([]any)
	for _, i := range items {
		s, _ := i.(string)
		out = append(out, s)
	}
	return out
}
