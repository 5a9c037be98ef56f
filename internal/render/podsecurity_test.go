package render

import (
	"strings"
	"testing"
)

// privilegedPod is a pod spec that baseline forbids: host PID, a privileged container and a
// hostPath volume of the node's root.
const privilegedPod = `
      hostPID: true
      containers:
      - name: c
        image: busybox
        securityContext: {privileged: true}
        volumeMounts: [{name: root, mountPath: /host}]
      volumes:
      - name: root
        hostPath: {path: /}
`

// ordinaryPod passes baseline but not restricted (no runAsNonRoot, no seccomp profile, no
// dropped capabilities).
const ordinaryPod = `
      containers:
      - name: c
        image: nginx
`

// indent shifts a pod spec to sit under a template path of the given depth.
func indent(spec string, extra int) string {
	pad := strings.Repeat(" ", extra)
	lines := strings.Split(spec, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

func workload(apiVersion, kind, podSpec string) string {
	head := "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {name: w, namespace: team-a}\n"
	switch kind {
	case "Pod":
		return head + "spec:\n" + dedent(podSpec, 4)
	case "CronJob":
		return head + "spec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n" + indent(podSpec, 4)
	case "ConfigMap":
		return head + "data: {a: b}\n"
	}
	return head + "spec:\n  template:\n    spec:\n" + podSpec
}

// dedent removes n leading spaces from every line.
func dedent(s string, n int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) >= n && strings.TrimSpace(l[:n]) == "" {
			lines[i] = l[n:]
		}
	}
	return strings.Join(lines, "\n")
}

// Every kind that carries a pod template is checked where it keeps it; other kinds pass.
func TestCheckPodSecurityPerKind(t *testing.T) {
	kinds := []struct{ apiVersion, kind string }{
		{"v1", "Pod"}, {"v1", "ReplicationController"}, {"apps/v1", "Deployment"}, {"apps/v1", "ReplicaSet"},
		{"apps/v1", "StatefulSet"}, {"apps/v1", "DaemonSet"}, {"batch/v1", "Job"}, {"batch/v1", "CronJob"},
	}
	for _, k := range kinds {
		for _, tc := range []struct {
			name, pod, level string
			wantChecks       []string // empty: allowed
		}{
			{"privileged at baseline", privilegedPod, "baseline", []string{"host namespaces", "privileged", "hostPath volumes"}},
			{"privileged at privileged", privilegedPod, "privileged", nil},
			{"ordinary at baseline", ordinaryPod, "baseline", nil},
			{"ordinary at restricted", ordinaryPod, "restricted", []string{"allowPrivilegeEscalation", "runAsNonRoot", "seccompProfile"}},
		} {
			t.Run(k.kind+"/"+tc.name, func(t *testing.T) {
				obj := mustObj(t, workload(k.apiVersion, k.kind, tc.pod))
				err := CheckPodSecurity(obj, tc.level)
				if len(tc.wantChecks) == 0 {
					if err != nil {
						t.Fatalf("CheckPodSecurity = %v, want nil", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("CheckPodSecurity = nil, want a violation of %q", tc.level)
				}
				for _, want := range append(tc.wantChecks, k.kind+" team-a/w", `level "`+tc.level+`"`, "--pod-security-exempt-namespaces") {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
			})
		}
	}
}

func TestCheckPodSecuritySkipsOtherKindsAndRefusesUnknownLevels(t *testing.T) {
	cm := mustObj(t, workload("v1", "ConfigMap", ""))
	if err := CheckPodSecurity(cm, "restricted"); err != nil {
		t.Errorf("ConfigMap: CheckPodSecurity = %v, want nil", err)
	}
	// A custom resource named like a workload is not read as one.
	other := mustObj(t, workload("example.com/v1", "Deployment", privilegedPod))
	if err := CheckPodSecurity(other, "restricted"); err != nil {
		t.Errorf("example.com Deployment: CheckPodSecurity = %v, want nil", err)
	}
	dep := mustObj(t, workload("apps/v1", "Deployment", ordinaryPod))
	if err := CheckPodSecurity(dep, "strict"); err == nil || !strings.Contains(err.Error(), "privileged, baseline or restricted") {
		t.Errorf("unknown level: CheckPodSecurity = %v, want an error listing the levels", err)
	}
}
