package inventory

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// aliceToken authenticates as alice, a contributor of team-a: the control plane allows her
// everything in namespace team-a and nothing else.
const aliceToken = "alice-token-hunter2"

// hostileServer is an inventory API over two teams' objects, with a control plane that
// authenticates only aliceToken and authorizes alice in team-a only.
func hostileServer(t *testing.T) (*Server, *countingPreviewer) {
	t.Helper()
	kc := k8sfake.NewClientset()
	kc.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token != aliceToken {
			return true, &authenticationv1.TokenReview{}, nil
		}
		return true, &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a-devs", "system:authenticated"}}}}, nil
	})
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		allowed := sar.Spec.User == "alice" && ra != nil && ra.Namespace == "team-a"
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
	})
	var objs []client.Object
	for _, ns := range []string{"team-a", "team-b"} {
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment"},
				Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
					PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: ns, Name: "web"}}},
			&rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment-r2"}},
		)
	}
	objs = append(objs, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}})
	s := New(fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build(), nil, kc)
	p := &countingPreviewer{}
	s.Preview = p
	return s, p
}

// countingPreviewer places nothing and counts how often it was asked.
type countingPreviewer struct{ calls int }

func (p *countingPreviewer) Preview(context.Context, workv1alpha1.Binding, *policyv1alpha1.PropagationSpec, []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, error) {
	p.calls++
	return nil, nil
}

// ask sends one request with a bearer token and answers the status code and body.
func ask(s *Server, method, target, token string, body io.Reader) (int, string) {
	r := httptest.NewRequest(method, target, body)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

func parameterOf(t *testing.T, body string) string {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an API error: %q", body)
	}
	return e.Parameter
}

// A team's contributor reads only the namespaces the control plane lets them list bindings
// in: another team's applications and releases are left out of every list, asking for its
// namespace or history is 403, and the fleet's clusters need their own permission.
func TestInventoryAnswersOnlyWhatTheUserMayRead(t *testing.T) {
	s, _ := hostileServer(t)
	code, body := ask(s, http.MethodGet, "/api/v1/applications", aliceToken, nil)
	var apps struct{ Items []Workload }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &apps) != nil {
		t.Fatalf("applications: %d %s", code, body)
	}
	if len(apps.Items) != 1 || apps.Items[0].Namespace != "team-a" {
		t.Errorf("applications answered %+v, want team-a's web only", apps.Items)
	}
	code, body = ask(s, http.MethodGet, "/api/v1/releases", aliceToken, nil)
	var rels struct{ Items []ReleaseItem }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rels) != nil {
		t.Fatalf("releases: %d %s", code, body)
	}
	if len(rels.Items) != 1 || rels.Items[0].Namespace != "team-a" {
		t.Errorf("releases answered %+v, want team-a's only", rels.Items)
	}
	for _, target := range []string{
		"/api/v1/applications?namespace=team-b",
		"/api/v1/releases?namespace=team-b",
		"/api/v1/history?team=team-b",
		"/api/v1/clusters",
	} {
		if code, body := ask(s, http.MethodGet, target, aliceToken, nil); code != http.StatusForbidden || strings.Contains(body, `"items"`) {
			t.Errorf("%s: %d %s, want 403 and nothing of it", target, code, body)
		}
	}
}

// The team parameter is a namespace: a spelling that is not a DNS label (a path, an encoded
// slash, upper case, too long) is refused as a bad parameter before anything is looked up.
func TestInventoryRefusesATeamThatCannotBeANamespace(t *testing.T) {
	s, _ := hostileServer(t)
	for _, team := range []string{"../team-a", "team-a/..", "team%2Fa", "%2e%2e", "Team-A", "team_a", "team-a\x00", strings.Repeat("a", 64)} {
		code, body := ask(s, http.MethodGet, "/api/v1/history?team="+url.QueryEscape(team), aliceToken, nil)
		if code != http.StatusBadRequest || parameterOf(t, body) != "team" {
			t.Errorf("team %q: %d %s, want 400 naming the team parameter", team, code, body)
		}
	}
}

// Pages and bodies are bounded: a history page is at most MaxLimit records, and a what-if body
// over 1 MiB is refused without being parsed or previewed.
func TestInventoryBoundsPagesAndBodies(t *testing.T) {
	s, previews := hostileServer(t)
	for _, limit := range []string{"0", "1001", "99999999999999999999", "-1"} {
		code, body := ask(s, http.MethodGet, "/api/v1/history?limit="+limit, aliceToken, nil)
		if code != http.StatusBadRequest || parameterOf(t, body) != "limit" {
			t.Errorf("limit %s: %d %s, want 400 naming limit", limit, code, body)
		}
	}
	big := `{"apiVersion":"policy.flotilla.dev/v1alpha1","kind":"PropagationPolicy","metadata":{"namespace":"team-a","name":"web","annotations":{"x":"` +
		strings.Repeat("x", 1<<20) + `"}}}`
	code, body := ask(s, http.MethodPost, "/api/v1/what-if", aliceToken, strings.NewReader(big))
	if code != http.StatusBadRequest || parameterOf(t, body) != "body" || !strings.Contains(body, "at most 1 MiB") {
		t.Errorf("a what-if body over 1 MiB: %d %.200s, want 400 naming the bound", code, body)
	}
	if previews.calls != 0 {
		t.Errorf("an oversized what-if was previewed %d times", previews.calls)
	}
}

// What a request carries is not echoed back unbounded: a refused token never appears in the
// answer, and a long team parameter is quoted at most 80 characters.
func TestInventoryErrorsEchoNeitherTokensNorLongInput(t *testing.T) {
	s, _ := hostileServer(t)
	code, body := ask(s, http.MethodGet, "/api/v1/applications", "stolen-token-hunter2", nil)
	if code != http.StatusUnauthorized || strings.Contains(body, "hunter2") {
		t.Errorf("a refused token: %d %s, want 401 without the token", code, body)
	}
	team := strings.Repeat("x", 10000) + "TAIL"
	code, body = ask(s, http.MethodGet, "/api/v1/history?team="+team, aliceToken, nil)
	if code != http.StatusBadRequest || strings.Contains(body, "TAIL") || len(body) > 512 {
		t.Errorf("a 10004-character team: %d, %d bytes answered (%.120s...), want 400 quoting at most 80 characters", code, len(body), body)
	}
	param := strings.Repeat("p", 10000) + "TAIL"
	code, body = ask(s, http.MethodGet, "/api/v1/history?"+param+"=1", aliceToken, nil)
	if code != http.StatusBadRequest || strings.Contains(body, "TAIL") || len(body) > 1024 {
		t.Errorf("a 10004-character parameter name: %d, %d bytes answered (%.120s...), want 400 quoting at most 64 characters", code, len(body), body)
	}
}

// what-if answers with Flotilla's view of every binding in scope, so it answers only for a change
// its asker could make: a team's contributor asking about the platform's ClusterPropagationPolicy
// or another team's PropagationPolicy gets 403, and nothing is previewed.
func TestWhatIfNeedsTheRightToMakeTheChange(t *testing.T) {
	s, previews := hostileServer(t)
	for name, obj := range map[string]string{
		"the platform's policy": `{"apiVersion":"policy.flotilla.dev/v1alpha1","kind":"ClusterPropagationPolicy","metadata":{"name":"fleet"},"spec":{"resourceSelectors":[{"apiVersion":"apps/v1","kind":"Deployment"}]}}`,
		"another team's policy": `{"apiVersion":"policy.flotilla.dev/v1alpha1","kind":"PropagationPolicy","metadata":{"namespace":"team-b","name":"web"},"spec":{"resourceSelectors":[{"apiVersion":"apps/v1","kind":"Deployment"}]}}`,
		"a cluster":             `{"apiVersion":"cluster.flotilla.dev/v1alpha1","kind":"Cluster","metadata":{"name":"east","labels":{"region":"moved"}}}`,
	} {
		code, body := ask(s, http.MethodPost, "/api/v1/what-if", aliceToken, strings.NewReader(obj))
		if code != http.StatusForbidden || !strings.Contains(body, "may not update") {
			t.Errorf("%s: %d %s, want 403 saying alice may not make the change", name, code, body)
		}
	}
	if previews.calls != 0 {
		t.Errorf("refused what-ifs were previewed %d times", previews.calls)
	}
}
