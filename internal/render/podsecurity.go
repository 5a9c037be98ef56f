package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// DefaultPodSecurityLevel is the Pod Security level a namespace's workloads meet when the
// platform sets none: baseline forbids host namespaces, host paths, privileged containers and
// added capabilities beyond the default set, and lets ordinary workloads run unchanged.
const DefaultPodSecurityLevel = string(psaapi.LevelBaseline)

// podSecurity evaluates pods with the checks the Pod Security admission plugin runs. The
// evaluator holds no state between calls, so one serves every reconcile.
var podSecurity = func() psapolicy.Evaluator {
	e, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("pod security checks: %v", err)) // the library's own checks are valid
	}
	return e
}()

// ParsePodSecurityLevel accepts privileged, baseline or restricted.
func ParsePodSecurityLevel(level string) (psaapi.Level, error) {
	l, err := psaapi.ParseLevel(level)
	if err != nil {
		return "", fmt.Errorf("pod security level %q: give privileged, baseline or restricted", level)
	}
	return l, nil
}

// podTemplatePaths is where the kinds that run pods keep the pod's metadata and spec; the
// pod itself is at the root. Other kinds (including custom resources that embed pod
// templates) are not checked here: the member's admission sees the pods they create.
var podTemplatePaths = map[string][]string{
	"Pod":                   {},
	"ReplicationController": {"spec", "template"},
	"Deployment.apps":       {"spec", "template"},
	"ReplicaSet.apps":       {"spec", "template"},
	"StatefulSet.apps":      {"spec", "template"},
	"DaemonSet.apps":        {"spec", "template"},
	"Job.batch":             {"spec", "template"},
	"CronJob.batch":         {"spec", "jobTemplate", "spec", "template"},
}

// CheckPodSecurity evaluates the pod template obj carries against a Pod Security level (at the
// latest policy version) and returns an error naming the object, the level, every failed check
// and the fix. Kinds without a pod template pass.
func CheckPodSecurity(obj *unstructured.Unstructured, level string) error {
	l, err := ParsePodSecurityLevel(level)
	if err != nil {
		return err
	}
	path, ok := podTemplatePaths[obj.GroupVersionKind().GroupKind().String()]
	if !ok || l == psaapi.LevelPrivileged {
		return nil
	}
	tmpl := obj.Object
	if len(path) > 0 {
		m, found, err := unstructured.NestedMap(obj.Object, path...)
		if err != nil {
			return fmt.Errorf("%s %s: %s: %w", obj.GetKind(), objectRef(obj), strings.Join(path, "."), err)
		}
		if !found {
			return nil // no pod template, no pods
		}
		tmpl = m
	}
	podMeta, podSpec := &metav1.ObjectMeta{}, &corev1.PodSpec{}
	if m, ok := tmpl["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, podMeta); err != nil {
			return fmt.Errorf("%s %s: reading the pod template's metadata: %w", obj.GetKind(), objectRef(obj), err)
		}
	}
	if s, ok := tmpl["spec"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s, podSpec); err != nil {
			return fmt.Errorf("%s %s: reading the pod template's spec: %w", obj.GetKind(), objectRef(obj), err)
		}
	}
	result := psapolicy.AggregateCheckResults(podSecurity.EvaluatePod(psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()}, podMeta, podSpec))
	if result.Allowed {
		return nil
	}
	failed := make([]string, len(result.ForbiddenReasons))
	for i, reason := range result.ForbiddenReasons {
		failed[i] = reason
		if d := result.ForbiddenDetails[i]; d != "" {
			failed[i] += " (" + d + ")"
		}
	}
	return fmt.Errorf("%s %s violates Pod Security level %q: %s; a namespace's workloads must meet the level the platform sets (the controller-manager's --pod-security-level): remove these settings from the pod template, or have the platform list the namespace in --pod-security-exempt-namespaces",
		obj.GetKind(), objectRef(obj), l, strings.Join(failed, "; "))
}
