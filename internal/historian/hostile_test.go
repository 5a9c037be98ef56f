package historian

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
)

// History is read per team (a team is its namespace), so a record is filed under the namespace
// of the template it records: labels a tenant writes (an Application's name, another team's
// name) never file team-a's changes as team-b's history.
func TestARecordIsFiledUnderItsTemplatesNamespace(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-deployment",
		Labels: map[string]string{appsv1alpha1.ApplicationLabel: "team-b-app", "team": "team-b", "tenancy.flotilla.dev/team": "team-b"}},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web"}}}
	rec := (&Historian{}).record(b, "east", 1, 2, history.OutcomeApplied, time.Now())
	if rec.Team != "team-a" || rec.Namespace != "team-a" {
		t.Errorf("record filed under team %q, namespace %q; want team-a for both", rec.Team, rec.Namespace)
	}
}
