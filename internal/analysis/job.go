package analysis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
)

// AnalysisRunLabel marks the member Jobs of an AnalysisRun; its value is the run's name
// (shortened with a hash when it is not a valid label value).
const AnalysisRunLabel = "rollout.flotilla.dev/analysis-run"

// AnalysisMetricLabel marks the member Jobs of one metric of a run.
const AnalysisMetricLabel = "rollout.flotilla.dev/analysis-metric"

// MeasurementAnnotation holds the index of the measurement a Job belongs to.
const MeasurementAnnotation = "rollout.flotilla.dev/analysis-measurement"

// keptJobMeasurements is how many measurements' Jobs stay in members for their logs; older
// ones are deleted when a new measurement starts.
const keptJobMeasurements = 2

// jobCallTimeout bounds every call to a member.
const jobCallTimeout = 15 * time.Second

// Members reaches the member clusters.
type Members interface {
	Clientset(cluster string) (kubernetes.Interface, error)
}

// ErrPullMember is what Members answers for a Pull member: the controller-manager holds no
// client to it, and its Jobs go through PullJobs.
var ErrPullMember = errors.New("a Pull member: the controller-manager holds no client to it")

// PullJobs hands a measurement's Job to a Pull member's agent, which applies it as it applies
// any Work, and reads it back as the agent reports it.
type PullJobs interface {
	// GetJob returns the Job as its agent last reported it; NotFound when never handed over.
	GetJob(ctx context.Context, cluster, namespace, name string) (*batchv1.Job, error)
	// RunJob hands the Job over; the agent makes its namespace, at level, when it is missing.
	RunJob(ctx context.Context, cluster string, job *batchv1.Job, level psapi.Level) error
	// DeleteJob takes it back: the agent deletes it from the member.
	DeleteJob(ctx context.Context, cluster, namespace, name string) error
}

// CacheMembers reaches members through the shared cluster cache.
type CacheMembers struct{ Cache *clustercache.Cache }

// Clientset implements Members.
func (m CacheMembers) Clientset(cluster string) (kubernetes.Interface, error) {
	member, err := m.Cache.Get(cluster)
	if err != nil {
		return nil, err
	}
	return member.Clientset, nil
}

// JobProvider runs a metric's Job in every cluster of the run, in the run's namespace. The
// first call of a measurement creates the Jobs and returns ErrInProgress; later calls read
// them: true once all completed, false as soon as one failed. The measurement's Jobs are named
// after the run, the metric and the metric's measurement count, so reading again (or creating
// again after a restart) always finds the same Jobs.
//
// The pod of a namespace's template is checked against the Pod Security level (restricted by
// default) before any Job is created: a violation is an error naming the library's reasons and
// the fix, and no Job exists. A namespace Flotilla creates for the Jobs gets the Pod Security
// Admission labels of the level, so the member enforces it too; an existing namespace is never
// relabelled. A ClusterAnalysisTemplate's Job (Platform) is the platform's: it is not checked,
// and a namespace it creates is not labelled.
type JobProvider struct {
	Members Members
	// PodSecurity is the level a namespace's Job pods must meet; empty means restricted.
	PodSecurity psapi.Level
	// Platform says the metric comes from a ClusterAnalysisTemplate.
	Platform bool
	// Pull runs the Jobs of Pull members (Members answers ErrPullMember for them); nil: none.
	Pull PullJobs
}

// jobs are a cluster's Jobs: through a client to the member, or through its agent.
type jobs interface {
	get(ctx context.Context, namespace, name string) (*batchv1.Job, error)
	create(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error)
	delete(ctx context.Context, namespace, name string) error
}

func (p *JobProvider) jobsIn(cluster string) (jobs, error) {
	cs, err := p.Members.Clientset(cluster)
	if errors.Is(err, ErrPullMember) && p.Pull != nil {
		return pulledJobs{pull: p.Pull, cluster: cluster, level: p.level()}, nil
	}
	if err != nil {
		return nil, err
	}
	return memberJobs{p: p, cs: cs}, nil
}

type memberJobs struct {
	p  *JobProvider
	cs kubernetes.Interface
}

func (m memberJobs) get(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return getJob(ctx, m.cs, namespace, name)
}

func (m memberJobs) create(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	return m.p.create(ctx, m.cs, job)
}

func (m memberJobs) delete(ctx context.Context, namespace, name string) error {
	cctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	return m.cs.BatchV1().Jobs(namespace).Delete(cctx, name, deleteInBackground())
}

type pulledJobs struct {
	pull    PullJobs
	cluster string
	level   psapi.Level
}

func (j pulledJobs) get(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return j.pull.GetJob(ctx, j.cluster, namespace, name)
}

func (j pulledJobs) create(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	if err := j.pull.RunJob(ctx, j.cluster, job, j.level); err != nil {
		return nil, err
	}
	return job.DeepCopy(), nil // no status yet: running until the agent reports
}

func (j pulledJobs) delete(ctx context.Context, namespace, name string) error {
	return j.pull.DeleteJob(ctx, j.cluster, namespace, name)
}

// level is the Pod Security level the provider's Jobs are held to; privileged holds them to
// nothing.
func (p *JobProvider) level() psapi.Level {
	switch {
	case p.Platform:
		return psapi.LevelPrivileged
	case p.PodSecurity == "":
		return psapi.LevelRestricted
	}
	return p.PodSecurity
}

// Measure implements Provider.
func (p *JobProvider) Measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) (any, string, error) {
	if metric.Provider.Job == nil {
		return nil, "", errors.New("provider.job is not set")
	}
	if len(run.Spec.Clusters) == 0 {
		return nil, "", errors.New("spec.clusters is empty: a job metric runs in the run's clusters; list at least one")
	}
	index := measurementIndex(run, metric.Name)
	name := JobName(run.Name, metric.Name, index)
	var desired *batchv1.Job
	var complete int
	var failed, running []string
	for _, cluster := range run.Spec.Clusters {
		js, err := p.jobsIn(cluster)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", cluster, err)
		}
		job, err := js.get(ctx, run.Namespace, name)
		if apierrors.IsNotFound(err) {
			if desired == nil {
				if desired, err = buildJob(run, metric, name, index); err != nil {
					return nil, "", err
				}
				if err := checkPodSecurity(p.level(), &desired.Spec.Template); err != nil {
					return nil, "", err
				}
			}
			job, err = js.create(ctx, desired)
		}
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: job %s/%s: %w", cluster, run.Namespace, name, err)
		}
		switch state, reason := jobState(job); state {
		case batchv1.JobComplete:
			complete++
		case batchv1.JobFailed:
			failed = append(failed, cluster+": "+reason)
		default:
			running = append(running, cluster)
		}
	}
	switch {
	case len(failed) > 0:
		return false, formatValue(map[string]any{"result": false, "failed": failed}), nil
	case len(running) > 0:
		return nil, "", ErrInProgress
	}
	return true, formatValue(map[string]any{"result": true, "complete": complete}), nil
}

// Stop deletes the Jobs of the metric's measurement in progress, for a run terminated before
// they finished. Clusters it cannot reach are skipped: their Jobs finish on their own.
func (p *JobProvider) Stop(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) error {
	name := JobName(run.Name, metric.Name, measurementIndex(run, metric.Name))
	var errs []error
	for _, cluster := range run.Spec.Clusters {
		js, err := p.jobsIn(cluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", cluster, err))
			continue
		}
		if err := js.delete(ctx, run.Namespace, name); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster %s: deleting job %s/%s: %w", cluster, run.Namespace, name, err))
		}
	}
	return errors.Join(errs...)
}

func (p *JobProvider) create(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) (*batchv1.Job, error) {
	if err := ensureNamespace(ctx, cs, job.Namespace, p.level()); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	created, err := cs.BatchV1().Jobs(job.Namespace).Create(cctx, job.DeepCopy(), metav1.CreateOptions{})
	cancel()
	if apierrors.IsAlreadyExists(err) {
		return getJob(ctx, cs, job.Namespace, job.Name)
	}
	if err != nil {
		return nil, err
	}
	deleteOldJobs(ctx, cs, job)
	return created, nil
}

// deleteOldJobs removes the Jobs of earlier measurements of the same metric but the latest
// few. It is best effort: a leftover Job costs nothing but space.
func deleteOldJobs(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) {
	current, err := strconv.Atoi(job.Annotations[MeasurementAnnotation])
	if err != nil {
		return
	}
	selector := labels.SelectorFromSet(labels.Set{AnalysisRunLabel: job.Labels[AnalysisRunLabel], AnalysisMetricLabel: job.Labels[AnalysisMetricLabel]})
	cctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	list, err := cs.BatchV1().Jobs(job.Namespace).List(cctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return
	}
	for _, old := range list.Items {
		if i, err := strconv.Atoi(old.Annotations[MeasurementAnnotation]); err == nil && i <= current-keptJobMeasurements {
			_ = cs.BatchV1().Jobs(old.Namespace).Delete(cctx, old.Name, deleteInBackground())
		}
	}
}

func getJob(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*batchv1.Job, error) {
	cctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	return cs.BatchV1().Jobs(namespace).Get(cctx, name, metav1.GetOptions{})
}

// deleteInBackground deletes a Job with its Pods (the API's default for Jobs orphans them).
func deleteInBackground() metav1.DeleteOptions {
	policy := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &policy}
}

// ensureNamespace creates the Jobs' namespace in a member when it is missing, labelled to
// enforce the Pod Security level (unless privileged). An existing namespace is left as it is:
// its labels are its owner's.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, namespace string, level psapi.Level) error {
	cctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Get(cctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Marked as Flotilla's like the executor's namespaces, so a Namespace template placed
		// later adopts it without a conflict.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue}}}
		if level != psapi.LevelPrivileged {
			ns.Labels[psapi.EnforceLevelLabel] = string(level)
			ns.Labels[psapi.EnforceVersionLabel] = psapi.VersionLatest
		}
		_, err = cs.CoreV1().Namespaces().Create(cctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return nil
}

// podSecurity evaluates pods against the Pod Security Standards, as the apiserver's admission
// plugin does.
var podSecurity = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// checkPodSecurity refuses a Job's pod that does not meet level, naming every violation and
// how to comply.
func checkPodSecurity(level psapi.Level, pod *corev1.PodTemplateSpec) error {
	if level == psapi.LevelPrivileged {
		return nil
	}
	evaluator, err := podSecurity()
	if err != nil {
		return fmt.Errorf("pod security checks: %w", err)
	}
	result := policy.AggregateCheckResults(evaluator.EvaluatePod(psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if result.Allowed {
		return nil
	}
	fix := "remove host namespaces, host paths, host ports, privileged mode and added capabilities"
	if level == psapi.LevelRestricted {
		fix += ", and set securityContext.runAsNonRoot: true and securityContext.seccompProfile.type: RuntimeDefault on the pod, allowPrivilegeEscalation: false and capabilities.drop: [ALL] on every container"
	}
	// Reasons and fix come first, the details (which container, which field) last and cut:
	// messages are bounded, and what to do must survive.
	return fmt.Errorf("provider.job.spec.template violates Pod Security %q, the platform's level for a namespace's analysis Jobs (%s); no Job was created: %s, or use a ClusterAnalysisTemplate, which the platform writes; details: %s",
		level, result.ForbiddenReason(), fix, Shorten(result.ForbiddenDetail(), 400))
}

// buildJob renders the metric's Job for one measurement, arguments substituted.
func buildJob(run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric, name string, index int32) (*batchv1.Job, error) {
	spec := metric.Provider.Job
	raw, err := substituteJSON(spec.Spec.Raw, argValues(run.Spec.Args))
	if err != nil {
		return nil, fmt.Errorf("provider.job.spec: %w", err)
	}
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   run.Namespace,
			Labels:      map[string]string{},
			Annotations: map[string]string{},
		},
	}
	if err := json.Unmarshal(raw, &job.Spec); err != nil {
		return nil, fmt.Errorf("provider.job.spec is not a batch/v1 JobSpec: %w", err)
	}
	if job.Spec.Template.Spec.RestartPolicy == "" {
		// Jobs reject the Pod default (Always); a one-shot check must not restart in place.
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	for k, v := range spec.Metadata.Labels {
		job.Labels[k] = v
	}
	for k, v := range spec.Metadata.Annotations {
		job.Annotations[k] = v
	}
	job.Labels[AnalysisRunLabel] = labelValue(run.Name)
	job.Labels[AnalysisMetricLabel] = labelValue(metric.Name)
	job.Annotations[MeasurementAnnotation] = strconv.Itoa(int(index))
	return job, nil
}

// jobState is Complete or Failed once the Job finished (with the reason of a failure), and
// empty while it runs.
func jobState(job *batchv1.Job) (batchv1.JobConditionType, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		if c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed {
			return c.Type, c.Reason
		}
	}
	return "", ""
}

// measurementIndex is the number of measurements the metric has finished: the index of the
// measurement being taken.
func measurementIndex(run *rolloutv1alpha1.AnalysisRun, metric string) int32 {
	for _, r := range run.Status.MetricResults {
		if r.Name == metric {
			return r.Count
		}
	}
	return 0
}

// JobName names the Jobs of one measurement: <run>-<metric>-<index>, made a valid DNS label;
// a name that had to be changed or cut gets a hash of the original, so names stay distinct.
func JobName(run, metric string, index int32) string {
	base := fmt.Sprintf("%s-%s-%d", run, metric, index)
	clean := replaceInvalid(strings.ToLower(base), func(r rune) bool {
		return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-'
	})
	if clean == base && len(base) <= validation.DNS1123LabelMaxLength {
		return base
	}
	return withHash(clean, base, validation.DNS1123LabelMaxLength)
}

// labelValue returns s when it is a valid label value, else a valid one with a hash of s.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	clean := replaceInvalid(s, func(r rune) bool {
		return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '_' || r == '.'
	})
	return withHash(clean, s, validation.LabelValueMaxLength)
}

// replaceInvalid turns every rune that is not valid into '-'.
func replaceInvalid(s string, valid func(rune) bool) string {
	return strings.Map(func(r rune) rune {
		if valid(r) {
			return r
		}
		return '-'
	}, s)
}

// withHash cuts prefix so that "<prefix>-<hash of original>" fits max, and joins them.
func withHash(prefix, original string, max int) string {
	sum := sha256.Sum256([]byte(original))
	hash := hex.EncodeToString(sum[:])[:10]
	if keep := max - len(hash) - 1; len(prefix) > keep {
		prefix = prefix[:keep]
	}
	prefix = strings.Trim(prefix, "-_.")
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}
