package agent

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// ImageRepository is where the agent's image is published (`make image-agent` builds it).
const ImageRepository = "ghcr.io/flotilla-dev/flotilla-agent"

// Names of what the manifest makes in the member.
const (
	manifestNamespace = "flotilla-system"
	manifestName      = "flotilla-agent"
	// IdentitySecretName keeps the agent's key and certificate in the member.
	IdentitySecretName = "flotilla-agent-identity"
	bootstrapSecret    = "flotilla-agent-bootstrap"
	caConfigMap        = "flotilla-agent-control-plane-ca"
)

// ManifestOptions describe the agent Deployment for one member.
type ManifestOptions struct {
	Cluster, ControlPlane, Token, Image string
	// CAPEM is the CA of the agent endpoint's serving certificate; empty: the image's roots.
	CAPEM []byte
}

// Manifest is the YAML that runs a Pull member's agent in it: its namespace, ServiceAccount
// and rights (the role `flotilla join` gives Push members' identity), the bootstrap token and
// the control plane's CA, and a one-replica Deployment that keeps its identity in a Secret of
// the member. Apply it in the member (kubectl apply -f); the token works once.
func Manifest(o ManifestOptions) ([]byte, error) {
	switch {
	case o.Cluster == "" || o.Token == "":
		return nil, errors.New("the agent manifest needs the cluster name and its bootstrap token")
	case !strings.HasPrefix(o.ControlPlane, "https://"):
		return nil, fmt.Errorf("--control-plane-url %q: give the agent endpoint the member reaches, https://HOST:PORT", o.ControlPlane)
	case o.Image == "":
		return nil, errors.New("--agent-image: give the agent's image")
	}
	labels := map[string]string{"app.kubernetes.io/name": manifestName, "app.kubernetes.io/part-of": "flotilla"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: manifestNamespace, Labels: labels}
	}
	role := kube.AgentClusterRole()
	role.Name = "flotilla:pull-agent"
	role.Labels = labels
	args := []string{"--cluster=" + o.Cluster, "--control-plane=" + o.ControlPlane,
		"--bootstrap-token-file=/etc/flotilla/bootstrap/token",
		"--identity-secret=" + manifestNamespace + "/" + IdentitySecretName,
		"--health-probe-bind-address=:8081", "--metrics-bind-address=:8080"}
	volumes := []corev1.Volume{{Name: "bootstrap", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: bootstrapSecret}}}}
	mounts := []corev1.VolumeMount{{Name: "bootstrap", MountPath: "/etc/flotilla/bootstrap", ReadOnly: true}}
	objs := []runtime.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: manifestNamespace, Labels: labels}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(manifestName)},
		role,
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: role.Name, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: manifestName, Namespace: manifestNamespace}}},
		&corev1.Secret{TypeMeta: typeMeta("v1", "Secret"), ObjectMeta: meta(bootstrapSecret), Type: corev1.SecretTypeOpaque,
			StringData: map[string]string{"token": o.Token}},
	}
	if len(o.CAPEM) > 0 {
		objs = append(objs, &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(caConfigMap),
			Data: map[string]string{"ca.crt": string(o.CAPEM)}})
		args = append(args, "--ca-file=/etc/flotilla/control-plane/ca.crt")
		volumes = append(volumes, corev1.Volume{Name: "control-plane-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: caConfigMap}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "control-plane-ca", MountPath: "/etc/flotilla/control-plane", ReadOnly: true})
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8081)}}, PeriodSeconds: 10}
	}
	objs = append(objs, &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta(manifestName),
		Spec: appsv1.DeploymentSpec{
			// One agent per member: two would apply the same Works and race on the identity.
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: manifestName,
				SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "agent", Image: o.Image, Args: args, VolumeMounts: mounts,
					Ports:          []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "health", ContainerPort: 8081}},
					LivenessProbe:  probe("/healthz"),
					ReadinessProbe: probe("/readyz"),
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
					},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
				Volumes: volumes,
			}},
		}})
	var out bytes.Buffer
	fmt.Fprintf(&out, "# flotilla-agent for cluster %s: apply in the member (kubectl apply -f). Its bootstrap token registers once.\n", o.Cluster)
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
