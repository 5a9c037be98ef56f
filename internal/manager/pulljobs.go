package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	psapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// pullAwareMembers answers analysis.ErrPullMember for Pull members, whose Jobs go through
// their agents (workJobs), and asks members for the others.
type pullAwareMembers struct {
	analysis.Members
	reader client.Reader
}

func (m pullAwareMembers) Clientset(name string) (kubernetes.Interface, error) {
	cl := &clusterv1alpha1.Cluster{}
	if err := m.reader.Get(context.Background(), client.ObjectKey{Name: name}, cl); err == nil && cl.Spec.SyncMode == clusterv1alpha1.SyncModePull {
		return nil, analysis.ErrPullMember
	}
	return m.Members.Clientset(name)
}

// workJobs hands an analysis Job to a Pull member's agent as a Work of its own in the
// cluster's execution namespace (no binding: the binding controller and the historian leave
// it alone), and reads the Job back from the status the agent reports.
type workJobs struct{ works client.Client }

func jobWorkName(namespace, name string) string { return "analysis." + namespace + "." + name }

var jobResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

func (j workJobs) GetJob(ctx context.Context, cluster, namespace, name string) (*batchv1.Job, error) {
	w := &workv1alpha1.Work{}
	if err := j.works.Get(ctx, client.ObjectKey{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: jobWorkName(namespace, name)}, w); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(jobResource, name)
		}
		return nil, err
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if st := w.Status.ManifestStatus; st != nil && len(st.Raw) > 0 {
		if err := json.Unmarshal(st.Raw, &job.Status); err != nil {
			return nil, fmt.Errorf("the status its agent reported of job %s/%s: %w", namespace, name, err)
		}
	}
	return job, nil
}

func (j workJobs) RunJob(ctx context.Context, cluster string, job *batchv1.Job, level psapi.Level) error {
	job = job.DeepCopy()
	job.APIVersion, job.Kind = "batch/v1", "Job"
	raw, err := json.Marshal(job)
	if err != nil {
		return err
	}
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: jobWorkName(job.Namespace, job.Name),
			Labels: map[string]string{workv1alpha1.ClusterLabel: cluster,
				analysis.AnalysisRunLabel: job.Labels[analysis.AnalysisRunLabel], analysis.AnalysisMetricLabel: job.Labels[analysis.AnalysisMetricLabel]},
			Annotations: map[string]string{analysis.MeasurementAnnotation: job.Annotations[analysis.MeasurementAnnotation]}},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
	}
	if level != psapi.LevelPrivileged {
		w.Annotations[names.PodSecurityLevelAnnotation] = string(level)
	}
	if err := j.works.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	j.dropOldJobs(ctx, w)
	return nil
}

func (j workJobs) DeleteJob(ctx context.Context, cluster, namespace, name string) error {
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: jobWorkName(namespace, name)}}
	if err := j.works.Delete(ctx, w); err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(jobResource, name)
		}
		return err
	}
	return nil
}

// dropOldJobs removes the Works of earlier measurements of the same metric but the latest
// few, as the Job provider does with Jobs it makes itself; best effort.
func (j workJobs) dropOldJobs(ctx context.Context, w *workv1alpha1.Work) {
	current, err := strconv.Atoi(w.Annotations[analysis.MeasurementAnnotation])
	if err != nil {
		return
	}
	list := &workv1alpha1.WorkList{}
	if err := j.works.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels{
		analysis.AnalysisRunLabel: w.Labels[analysis.AnalysisRunLabel], analysis.AnalysisMetricLabel: w.Labels[analysis.AnalysisMetricLabel]}); err != nil {
		return
	}
	for i := range list.Items {
		old := &list.Items[i]
		if n, err := strconv.Atoi(old.Annotations[analysis.MeasurementAnnotation]); err == nil && n <= current-analysisJobsKept {
			_ = j.works.Delete(ctx, old)
		}
	}
}

// analysisJobsKept matches the Job provider's: the latest measurements' Jobs stay to read.
const analysisJobsKept = 2
