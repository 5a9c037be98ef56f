package inventory

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// driftedFields lists "Kind/name /field" for each field changed by hand in a member.
func driftedFields(d *workv1alpha1.DriftStatus) []string {
	var out []string
	for _, o := range d.Objects {
		for _, f := range o.Fields {
			out = append(out, o.Kind+"/"+o.Name+" "+f)
		}
		if len(o.Fields) == 0 {
			out = append(out, o.Kind+"/"+o.Name)
		}
	}
	return out
}

// replicasOf reads replicas and readyReplicas from a member object's status, when it has them.
func replicasOf(raw *runtime.RawExtension) (*int64, *int64) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	var st struct {
		Replicas      *int64 `json:"replicas"`
		ReadyReplicas *int64 `json:"readyReplicas"`
	}
	if json.Unmarshal(raw.Raw, &st) != nil {
		return nil, nil
	}
	if st.Replicas != nil && st.ReadyReplicas == nil {
		zero := int64(0)
		st.ReadyReplicas = &zero
	}
	return st.Replicas, st.ReadyReplicas
}

// ReleaseItem is one release as the API shows it: where its waves stand and what its
// analysis runs measured.
type ReleaseItem struct {
	Namespace      string    `json:"namespace"`
	Name           string    `json:"name"`
	Created        time.Time `json:"created"`
	Kind           string    `json:"kind"`
	Template       string    `json:"template"`
	TemplateNS     string    `json:"templateNamespace,omitempty"`
	Revision       int64     `json:"revision"`
	StableRevision int64     `json:"stableRevision"`
	Paused         bool      `json:"paused,omitempty"`
	Abort          bool      `json:"abort,omitempty"`
	Phase          string    `json:"phase"`
	// Steps are the labels of each wave's canary steps, by wave name.
	Steps    map[string][]string           `json:"steps,omitempty"`
	Status   rolloutv1alpha1.ReleaseStatus `json:"status"`
	Analyses []AnalysisItem                `json:"analyses,omitempty"`
}

// AnalysisItem is one analysis run of a release and its measurements.
type AnalysisItem struct {
	Name    string                         `json:"name"`
	Wave    string                         `json:"wave,omitempty"`
	Phase   string                         `json:"phase,omitempty"`
	Message string                         `json:"message,omitempty"`
	Metrics []rolloutv1alpha1.MetricResult `json:"metrics,omitempty"`
}

// releases answers where each release in the user's namespaces stands, newest first.
func (s *Server) releases(w http.ResponseWriter, r *http.Request, u *User) {
	q := r.URL.Query()
	scope, opts, ok := s.namespaced(w, r, u, "namespace", "name")
	if !ok {
		return
	}
	var rl rolloutv1alpha1.ReleaseList
	if err := s.Client.List(r.Context(), &rl, opts...); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing releases: %v", err)
		return
	}
	out := struct {
		Items []ReleaseItem `json:"items"`
	}{Items: []ReleaseItem{}}
	for i := range rl.Items {
		rel := &rl.Items[i]
		if !inScope(scope, rel.Namespace) || (q.Get("name") != "" && q.Get("name") != rel.Name) {
			continue
		}
		out.Items = append(out.Items, s.releaseItem(r, rel))
	}
	slices.SortFunc(out.Items, func(a, b ReleaseItem) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	reply(w, out)
}

func (s *Server) releaseItem(r *http.Request, rel *rolloutv1alpha1.Release) ReleaseItem {
	it := ReleaseItem{Namespace: rel.Namespace, Name: rel.Name, Created: rel.CreationTimestamp.Time, Kind: rel.Spec.Resource.Kind,
		Template: rel.Spec.Resource.Name, TemplateNS: rel.Spec.Resource.Namespace, Revision: rel.Spec.Revision,
		StableRevision: rel.Spec.StableRevision, Paused: rel.Spec.Paused, Abort: rel.Spec.Abort,
		Phase: string(rel.Status.Phase), Status: rel.Status, Steps: map[string][]string{}}
	runs := map[string]string{} // run name → wave
	for _, ws := range rel.Status.Waves {
		steps := revision.WaveSteps(rel, ws.Name)
		for k := range steps {
			it.Steps[ws.Name] = append(it.Steps[ws.Name], revision.StepLabel(steps, k))
		}
		if ws.AnalysisRun != "" {
			runs[ws.AnalysisRun] = ws.Name
		}
	}
	if rel.Status.BackgroundAnalysisRun != "" {
		runs[rel.Status.BackgroundAnalysisRun] = ""
	}
	names := make([]string, 0, len(runs))
	for n := range runs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		run := &rolloutv1alpha1.AnalysisRun{}
		if err := s.Client.Get(r.Context(), client.ObjectKey{Namespace: rel.Namespace, Name: n}, run); err != nil {
			continue
		}
		it.Analyses = append(it.Analyses, AnalysisItem{Name: n, Wave: runs[n], Phase: string(run.Status.Phase),
			Message: run.Status.Message, Metrics: run.Status.MetricResults})
	}
	return it
}
