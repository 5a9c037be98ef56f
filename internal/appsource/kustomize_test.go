package appsource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kustomizeRepo is a base and a prod overlay, as a repository would hold them.
func kustomizeRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"base/kustomization.yaml": "resources:\n- deployment.yaml\n- service.yaml\n",
		"base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`,
		"base/service.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n",
		"overlays/prod/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
commonLabels:
  env: prod
resources:
- ../../base
- extra
patches:
- path: replicas.yaml
configMapGenerator:
- name: settings
  files:
  - app.properties
  options: {disableNameSuffixHash: true}
`,
		"overlays/prod/replicas.yaml":             "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
		"overlays/prod/app.properties":            "color=blue\n",
		"overlays/prod/extra/kustomization.yaml":  "resources: [cm.yaml]\n",
		"overlays/prod/extra/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
		"overlays/prod/README.md":                 "kustomize ignores this",
		"overlays/staging/kustomization.yml":      "resources: [../../base]\nnamePrefix: staging-\n",
		"unrelated/big.bin":                       strings.Repeat("x", 4096), // never read by kustomize
		"overlays/prod/.hidden-is-fine/x.txt":     "",
		"overlays/other/Kustomization":            "resources: [../../base]\n",
		"overlays/other/not-a-manifest-list.yaml": "- a\n",
	})
	return root
}

func TestRenderKustomizeBaseAndOverlay(t *testing.T) {
	root := kustomizeRepo(t)
	objs, err := RenderDir(root, "overlays/prod", Limits{MaxFileBytes: 2048})
	const k = "overlays/prod/kustomization.yaml"
	// kustomize's legacy order: ConfigMaps and Services before Deployments.
	mustSummary(t, objs, err,
		k+":0 ConfigMap/prod-extra",
		k+":0 ConfigMap/prod-settings",
		k+":0 Service/prod-web",
		k+":0 Deployment/prod-web",
	)
	for _, o := range objs {
		if o.Object.GetLabels()["env"] != "prod" {
			t.Errorf("%s: labels %v, want env=prod from commonLabels", o.Object.GetName(), o.Object.GetLabels())
		}
	}
	dep := objs[3].Object.Object
	if r := dep["spec"].(map[string]any)["replicas"]; r != int64(3) {
		t.Errorf("replicas = %#v, want the overlay's patch (int64 3)", r)
	}
	if d := objs[1].Object.Object["data"].(map[string]any); d["app.properties"] != "color=blue\n" {
		t.Errorf("generated ConfigMap data = %v", d)
	}

	objs, err = RenderDir(root, "overlays/staging", Limits{})
	mustSummary(t, objs, err, "overlays/staging/kustomization.yml:0 Service/staging-web", "overlays/staging/kustomization.yml:0 Deployment/staging-web")
	objs, err = RenderDir(root, "overlays/other", Limits{})
	mustSummary(t, objs, err, "overlays/other/Kustomization:0 Service/web", "overlays/other/Kustomization:0 Deployment/web")
}

func TestRenderKustomizeRefusesRemoteBases(t *testing.T) {
	for _, tc := range []struct{ kustomization, entry string }{
		{"resources:\n- https://github.com/org/repo//deploy?ref=v1", "https://github.com/org/repo//deploy?ref=v1"},
		{"resources:\n- github.com/org/repo/deploy", "github.com/org/repo/deploy"},
		{"bases:\n- git@github.com:org/repo.git//deploy", "git@github.com:org/repo.git//deploy"},
		{"resources:\n- deploy@git.example.com:org/repo", "deploy@git.example.com:org/repo"},
		{"components:\n- ssh://git@example.com/org/repo", "ssh://git@example.com/org/repo"},
		{"resources:\n- ../base?ref=main", "../base?ref=main"},
		{"resources:\n- git::https://example.com/repo", "git::https://example.com/repo"},
		{"helmCharts:\n- {name: redis, repo: oci://registry.example.com/charts}", "oci://registry.example.com/charts"},
		{"configMapGenerator:\n- {name: x, files: [k=https://example.com/file]}", "k=https://example.com/file"},
	} {
		root := kustomizeRepo(t)
		writeFiles(t, root, map[string]string{"overlays/prod/kustomization.yaml": tc.kustomization + "\n"})
		_, err := RenderDir(root, "overlays/prod", Limits{})
		mustFileError(t, err, "overlays/prod/kustomization.yaml", 0, `entry "`+tc.entry+`" is remote: remote bases are refused`)
	}
	// Nested kustomizations under path, and bases reached from it, are checked too.
	root := kustomizeRepo(t)
	writeFiles(t, root, map[string]string{"overlays/prod/extra/kustomization.yaml": "resources:\n- cm.yaml\n- https://example.com/x.yaml\n"})
	_, err := RenderDir(root, "overlays/prod", Limits{})
	mustFileError(t, err, "overlays/prod/extra/kustomization.yaml", 0, `"https://example.com/x.yaml" is remote`)
	root = kustomizeRepo(t)
	writeFiles(t, root, map[string]string{"base/kustomization.yaml": "resources:\n- github.com/org/repo\n"})
	_, err = RenderDir(root, "overlays/staging", Limits{})
	mustFileError(t, err, "base/kustomization.yaml", 0, "remote bases are refused")
}

func TestRenderKustomizeStaysInTheRepository(t *testing.T) {
	const k = "overlays/prod/kustomization.yaml"
	// A file outside the kustomization root: kustomize's root-only restriction refuses it.
	root := kustomizeRepo(t)
	writeFiles(t, root, map[string]string{
		k:                      "resources:\n- ../secret.yaml\n",
		"overlays/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
	})
	_, err := RenderDir(root, "overlays/prod", Limits{})
	mustFileError(t, err, k, 0, "is not in or below")

	// An entry leaving the repository, a missing entry (kustomize would retry it as a URL).
	for entry, want := range map[string]string{
		"../../../etc":  "leads outside the repository",
		"/../../etc":    "does not exist in the repository", // "/" is the repository root
		"missing.yaml":  `"missing.yaml" does not exist in the repository`,
		"example.com/x": "does not exist in the repository",
	} {
		root := kustomizeRepo(t)
		writeFiles(t, root, map[string]string{k: "resources:\n- " + entry + "\n"})
		_, err := RenderDir(root, "overlays/prod", Limits{})
		mustFileError(t, err, k, 0, want)
	}

	// A symlink leaving the repository is refused naming the file.
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n"})
	root = kustomizeRepo(t)
	writeFiles(t, root, map[string]string{k: "resources:\n- stolen.yaml\n"})
	if err := os.Symlink(filepath.Join(outside, "cm.yaml"), filepath.Join(root, "overlays/prod/stolen.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err = RenderDir(root, "overlays/prod", Limits{})
	mustFileError(t, err, "overlays/prod/stolen.yaml", 0, "leads outside the repository")
}

func TestRenderKustomizeLimitsAndErrors(t *testing.T) {
	const k = "overlays/prod/kustomization.yaml"
	root := kustomizeRepo(t)
	writeFiles(t, root, map[string]string{"overlays/prod/app.properties": strings.Repeat("x", 3000)})
	_, err := RenderDir(root, "overlays/prod", Limits{MaxFileBytes: 2048})
	mustFileError(t, err, "overlays/prod/app.properties", 0, "over the limit of 2048 bytes per file")
	root = kustomizeRepo(t)
	_, err = RenderDir(root, "overlays/prod", Limits{MaxTotalBytes: 500})
	if !strings.Contains(err.Error(), "over the limit of 500 bytes in all") || IsTransient(err) {
		t.Errorf("total limit: got %v", err)
	}
	_, err = RenderDir(root, "overlays/prod", Limits{MaxObjects: 3})
	mustFileError(t, err, k, 0, "more than 3 objects")

	// kustomize's own failures name the kustomization.
	root = kustomizeRepo(t)
	writeFiles(t, root, map[string]string{"overlays/prod/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nope}\nspec: {replicas: 3}\n"})
	_, err = RenderDir(root, "overlays/prod", Limits{})
	e := mustFileError(t, err, k, 0, "kustomize: ")
	if e.Field != FieldPath {
		t.Errorf("Field = %q, want %s", e.Field, FieldPath)
	}
	writeFiles(t, root, map[string]string{k: "resources: [a\n"})
	_, err = RenderDir(root, "overlays/prod", Limits{})
	mustFileError(t, err, k, 1, "yaml: ")
}
