// Package pull is the control plane's side of Pull members, whose flotilla-agent dials out to
// the control plane instead of being reached by it: the bootstrap tokens `flotilla join NAME
// --mode Pull` prints, the CA that signs agents' client certificates, and the HTTPS endpoint
// agents call (Server). An agent registers once with a token, which names its cluster and
// works once; from then on its client certificate is its only credential, and it reaches
// exactly its own cluster: its Works (followed as the replicas of a sharded manager follow
// the leader, package worksync), reports of their status, and heartbeats carrying its
// member's health (handed to the clustercache, from which the cluster controller writes the
// Cluster's status).
//
// It must not apply anything to members, render Works or decide placement; the only
// control-plane writes it makes are the token Secret it uses up and the Cluster's
// status.agent identity at registration.
package pull

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// The agent endpoint reads Clusters and token Secrets, writes the Clusters' status.agent, uses
// tokens up and keeps the agents' CA.
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters/status,verbs=get;patch
// +kubebuilder:rbac:groups="",namespace=flotilla-system,resources=secrets,verbs=get;create;delete
// +kubebuilder:rbac:groups=config.flotilla.dev,resources=resourceinterpretercustomizations,verbs=get;list;watch

// Paths of the agent endpoint besides worksync's FollowPath and ReportPath.
const (
	RegisterPath  = "/agents/v1alpha1/register"
	RenewPath     = "/agents/v1alpha1/renew"
	HeartbeatPath = "/agents/v1alpha1/heartbeat"
	// CustomizationsPath serves the platform's ResourceInterpreterCustomizations (Lua), so an
	// agent judges and retains custom kinds as the controller-manager does.
	CustomizationsPath = "/agents/v1alpha1/customizations"
	// ClusterPath says whether the agent's cluster is being unjoined, and with which policy:
	// the agent asks before it removes a deleted Work's objects (the cluster's policy, Orphan
	// by default, wins over the Work's).
	ClusterPath = "/agents/v1alpha1/cluster"

	// maxRequestBytes bounds a registration or heartbeat body (discovery of a member with many
	// CRDs fits well within it).
	maxRequestBytes = 4 << 20
	// maxReportBytes bounds one batch of Work reports (the status of a few thousand Works).
	maxReportBytes = 32 << 20
	// maxStreamsPerCluster bounds the Works streams one cluster's agent holds open (one in use,
	// one while it reconnects).
	maxStreamsPerCluster = 2
)

// RegisterRequest is what an agent sends with its bootstrap token.
type RegisterRequest struct {
	Cluster string `json:"cluster"`
	Token   string `json:"token"`
	// CSR is a PEM certificate request signed by the agent's own key, which never leaves it.
	CSR string `json:"csr"`
}

// RegisterResponse carries the agent's client certificate.
type RegisterResponse struct {
	Certificate string    `json:"certificate"`
	NotAfter    time.Time `json:"notAfter"`
}

// RenewRequest asks for a certificate to a new key, over the current certificate.
type RenewRequest struct {
	CSR string `json:"csr"`
}

// Heartbeat is an agent's periodic report of itself and its member.
type Heartbeat struct {
	AgentVersion string `json:"agentVersion,omitempty"`
	// Readiness is the agent's probe verdict on its member's API server (Ready, NotReady, or
	// Unknown before its first probe); Error says why not.
	Readiness         clustercache.Readiness           `json:"readiness"`
	Error             string                           `json:"error,omitempty"`
	KubernetesVersion string                           `json:"kubernetesVersion,omitempty"`
	APIEnablements    []clusterv1alpha1.APIEnablement  `json:"apiEnablements,omitempty"`
	Nodes             *clusterv1alpha1.NodeSummary     `json:"nodes,omitempty"`
	Resources         *clusterv1alpha1.ResourceSummary `json:"resources,omitempty"`
	// Events happened at the edge since the last delivered heartbeat, oldest first;
	// EventsDropped counts those the agent's journal could not keep.
	Events        []EdgeEvent `json:"events,omitempty"`
	EventsDropped int         `json:"eventsDropped,omitempty"`
}

// EdgeEvent is something that happened to a Work's objects in the member, at the time it
// happened there.
type EdgeEvent struct {
	Time          time.Time `json:"time"`
	Type          string    `json:"type"`
	Reason        string    `json:"reason"`
	Message       string    `json:"message"`
	WorkNamespace string    `json:"workNamespace"`
	WorkName      string    `json:"workName"`
}

// ClusterState is what ClusterPath answers.
type ClusterState struct {
	Unjoining      bool                                  `json:"unjoining,omitempty"`
	DeletionPolicy clusterv1alpha1.ClusterDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// HeartbeatResponse tells the agent what it must know besides its Works.
type HeartbeatResponse struct {
	// EventsTaken is how many of the heartbeat's events were recorded: the agent drops them
	// from its journal and sends the rest again.
	EventsTaken int `json:"eventsTaken"`
	// Customizations names the version of the platform's customizations: the agent reads
	// them again (CustomizationsPath) when it differs from what it loaded.
	Customizations string `json:"customizations,omitempty"`
}

// Server is the endpoint agents dial. It runs on the leader, which keeps the Works.
type Server struct {
	// Client reads Clusters (cached) and writes their status.agent; Reader reads token Secrets.
	Client client.Client
	Reader client.Reader
	Works  *workstore.Store
	CA     *CA
	// Members takes the health agents report.
	Members        *clustercache.Cache
	CertificateTTL time.Duration
	Now            func() time.Time
	// History takes the edge's events as records at the time they happened there; Recorder
	// records them on the bindings too. Either may be nil.
	History  HistoryAppender
	Recorder events.EventRecorder

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	streams  map[string]int
}

// HistoryAppender is the part of the history store the endpoint writes.
type HistoryAppender interface {
	Append(ctx context.Context, recs ...history.Record) (int, error)
}

// maxEventsPerBeat bounds the events one heartbeat carries in.
const maxEventsPerBeat = 500

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler serves the agent endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(RegisterPath, s.register)
	mux.Handle(RenewPath, s.agentOnly(s.renew))
	mux.Handle(HeartbeatPath, s.agentOnly(s.heartbeat))
	mux.Handle(ClusterPath, s.agentOnly(func(w http.ResponseWriter, _ *http.Request, cl *clusterv1alpha1.Cluster) {
		reply(w, ClusterState{Unjoining: !cl.DeletionTimestamp.IsZero(), DeletionPolicy: cl.Spec.DeletionPolicy})
	}))
	mux.Handle(CustomizationsPath, s.agentOnly(func(w http.ResponseWriter, r *http.Request, _ *clusterv1alpha1.Cluster) {
		list, _, err := s.customizations(r.Context())
		if err != nil {
			http.Error(w, "reading the customizations failed; try again", http.StatusServiceUnavailable)
			return
		}
		reply(w, list)
	}))
	mux.Handle(worksync.FollowPath, s.agentOnly(func(w http.ResponseWriter, r *http.Request, cl *clusterv1alpha1.Cluster) {
		asked := r.URL.Query()["cluster"]
		if slices.ContainsFunc(asked, func(n string) bool { return n != cl.Name }) {
			http.Error(w, fmt.Sprintf("the agent of cluster %s may follow only the Works of %s", cl.Name, cl.Name), http.StatusForbidden)
			return
		}
		if !s.openStream(cl.Name) {
			http.Error(w, fmt.Sprintf("cluster %s's agent follows its Works %d times already; close a stream first", cl.Name, maxStreamsPerCluster), http.StatusTooManyRequests)
			return
		}
		defer s.closeStream(cl.Name)
		worksync.ServeFollow(w, r, s.Works, []string{cl.Name})
	}))
	mux.Handle(worksync.ReportPath, s.agentOnly(func(w http.ResponseWriter, r *http.Request, cl *clusterv1alpha1.Cluster) {
		own := kube.ExecutionNamespacePrefix + cl.Name
		worksync.ServeReports(w, r, s.Works, maxReportBytes, func(rep workstore.Report) error {
			if rep.Namespace != own {
				return fmt.Errorf("the agent of cluster %s may report only on Works of %s (namespace %s)", cl.Name, cl.Name, own)
			}
			// An agent's executor holds a Work with its own finalizer only: any other would keep
			// the Work (and an unjoined Cluster) for ever.
			for _, f := range rep.Finalizers {
				if f != names.ExecutorFinalizer {
					return fmt.Errorf("work %s: finalizer %q is not the executor's (%s)", rep.Name, f, names.ExecutorFinalizer)
				}
			}
			return nil
		})
	}))
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(into); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the body is over %d bytes", maxRequestBytes), http.StatusRequestEntityTooLarge)
			return false
		}
		// The decoder's error is not echoed: it may quote the body, a token with it.
		http.Error(w, "the body is not the JSON this endpoint takes", http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// register redeems a bootstrap token for a client certificate. Every refusal says why in
// words that reveal nothing to a caller without a valid token but that the token is not valid.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	log := logf.FromContext(r.Context()).WithName("pull")
	if !s.limiter("").Allow() { // registrations of every caller share a budget: they are unauthenticated
		http.Error(w, "too many registrations at once; try again in a few seconds", http.StatusTooManyRequests)
		return
	}
	var req RegisterRequest
	if !decode(w, r, &req) {
		return
	}
	tok, err := ParseToken(req.Token)
	if err != nil {
		http.Error(w, "token: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(validation.IsDNS1123Label(req.Cluster)) > 0 {
		// Not echoed: the field is the caller's, and only a cluster's name is worth naming.
		http.Error(w, "cluster: give the name the cluster was joined under, a DNS label (flotilla join NAME --mode Pull)", http.StatusBadRequest)
		return
	}
	now := s.now()
	secret, err := checkToken(r.Context(), s.Reader, tok, req.Cluster, now)
	if err != nil {
		refuse(w, err, log)
		return
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := s.Reader.Get(r.Context(), client.ObjectKey{Name: req.Cluster}, cl); err != nil || !cl.DeletionTimestamp.IsZero() {
		http.Error(w, fmt.Sprintf("cluster %s is not joined (or is being unjoined): run flotilla join %s --mode Pull", req.Cluster, req.Cluster), http.StatusForbidden)
		return
	}
	if cl.Spec.SyncMode != clusterv1alpha1.SyncModePull {
		http.Error(w, fmt.Sprintf("cluster %s is joined in %s mode: the control plane reaches it; an agent registers only for a Pull cluster", cl.Name, cl.Spec.SyncMode), http.StatusForbidden)
		return
	}
	certPEM, cert, err := s.CA.Sign([]byte(req.CSR), cl.Name, s.CertificateTTL, now)
	if err != nil {
		http.Error(w, "csr: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := useToken(r.Context(), s.Client, secret); err != nil {
		refuse(w, err, log)
		return
	}
	if err := retry.OnError(retry.DefaultBackoff, func(error) bool { return true }, func() error {
		if err := s.Reader.Get(r.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
			return err
		}
		return s.recordIdentity(r.Context(), cl, cert, now, true, "")
	}); err != nil {
		log.Error(err, "Recording an agent's identity", "cluster", cl.Name)
		http.Error(w, "recording the agent's identity on the Cluster failed; register again with a new token", http.StatusServiceUnavailable)
		return
	}
	// The cluster's other tokens go too: a stray one (join run twice, a token in a log) could
	// register again and revoke this agent.
	if err := dropTokens(r.Context(), s.Reader, s.Client, cl.Name); err != nil {
		log.Error(err, "Deleting the cluster's other bootstrap tokens", "cluster", cl.Name)
	}
	log.Info("Agent registered", "cluster", cl.Name, "certificate", Fingerprint(cert), "notAfter", cert.NotAfter)
	reply(w, RegisterResponse{Certificate: string(certPEM), NotAfter: cert.NotAfter})
}

func refuse(w http.ResponseWriter, err error, log interface {
	Error(error, string, ...any)
}) {
	var refused errToken
	if errors.As(err, &refused) {
		http.Error(w, "token: "+refused.msg, http.StatusForbidden)
		return
	}
	log.Error(err, "Checking a bootstrap token")
	http.Error(w, "checking the token with the control plane failed; try again", http.StatusServiceUnavailable)
}

// recordIdentity makes cert the certificate accepted for the cluster. A registration revokes
// every earlier one; a renewal keeps the one it replaced (previous) until cert is presented.
func (s *Server) recordIdentity(ctx context.Context, cl *clusterv1alpha1.Cluster, cert *x509.Certificate, now time.Time, registered bool, previous string) error {
	before := cl.DeepCopy()
	if cl.Status.Agent == nil {
		cl.Status.Agent = &clusterv1alpha1.AgentStatus{}
	}
	a := cl.Status.Agent
	a.Identity = cert.Subject.CommonName
	a.CertificateSHA256 = Fingerprint(cert)
	a.PreviousCertificateSHA256 = previous
	notAfter := metav1.NewTime(cert.NotAfter)
	a.CertificateNotAfter = &notAfter
	if registered {
		at := metav1.NewTime(now.Truncate(time.Second))
		a.RegisteredAt = &at
	}
	return s.Client.Status().Patch(ctx, cl, client.MergeFrom(before))
}

// agentOnly serves only the agent of a joined Pull cluster, by its current certificate.
func (s *Server) agentOnly(next func(http.ResponseWriter, *http.Request, *clusterv1alpha1.Cluster)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate: an agent presents the certificate it registered for", http.StatusUnauthorized)
			return
		}
		cert := r.TLS.PeerCertificates[0]
		name, err := s.CA.ClusterOf(cert, s.now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		cl := &clusterv1alpha1.Cluster{}
		if err := s.Client.Get(r.Context(), client.ObjectKey{Name: name}, cl); err != nil {
			if apierrors.IsNotFound(err) {
				http.Error(w, fmt.Sprintf("cluster %s is not joined: it was unjoined; join it again with flotilla join %s --mode Pull", name, name), http.StatusForbidden)
				return
			}
			http.Error(w, "reading the cluster failed; try again", http.StatusServiceUnavailable)
			return
		}
		if cl.Spec.SyncMode != clusterv1alpha1.SyncModePull {
			http.Error(w, fmt.Sprintf("cluster %s is joined in %s mode now: its agent is not used", name, cl.Spec.SyncMode), http.StatusForbidden)
			return
		}
		fp := Fingerprint(cert)
		a := cl.Status.Agent
		switch {
		case a != nil && a.CertificateSHA256 == fp:
			if a.PreviousCertificateSHA256 != "" { // the renewed certificate is in use: the old one goes
				before := cl.DeepCopy()
				cl.Status.Agent.PreviousCertificateSHA256 = ""
				if err := s.Client.Status().Patch(r.Context(), cl, client.MergeFrom(before)); err != nil {
					http.Error(w, "recording the renewed certificate in use failed; try again", http.StatusServiceUnavailable)
					return
				}
			}
		case a != nil && a.PreviousCertificateSHA256 == fp:
			// Renewed, and this connection still carries the certificate it replaced.
		default:
			http.Error(w, fmt.Sprintf("this certificate of cluster %s's agent was replaced by a later registration; register again with a new token", name), http.StatusForbidden)
			return
		}
		next(w, r, cl)
	})
}

// renew issues a certificate to a new key and revokes the one presented.
func (s *Server) renew(w http.ResponseWriter, r *http.Request, cl *clusterv1alpha1.Cluster) {
	var req RenewRequest
	if !decode(w, r, &req) {
		return
	}
	certPEM, cert, err := s.CA.Sign([]byte(req.CSR), cl.Name, s.CertificateTTL, s.now())
	if err != nil {
		http.Error(w, "csr: "+err.Error(), http.StatusBadRequest)
		return
	}
	// The presented certificate stays accepted until the new one is used (see agentOnly).
	if err := s.recordIdentity(r.Context(), cl, cert, s.now(), false, Fingerprint(r.TLS.PeerCertificates[0])); err != nil {
		http.Error(w, "recording the renewed certificate failed; try again", http.StatusServiceUnavailable)
		return
	}
	reply(w, RegisterResponse{Certificate: string(certPEM), NotAfter: cert.NotAfter})
}

// takeEvents records the edge's events of cluster: history records at their edge time, and
// events on their bindings; it returns how many it took (all of them, unless the history store
// failed). Only the executor's drift events are taken, at a time no later than now and no
// earlier than maxEventAge ago (a compromised agent can neither write another kind of record
// nor push a team's real history out with records from the future). An event of another
// cluster's Work is ignored; one of a Work gone meanwhile is dropped (its template is no
// longer known here).
func (s *Server) takeEvents(ctx context.Context, cluster string, evs []EdgeEvent, dropped int) (int, error) {
	own := kube.ExecutionNamespacePrefix + cluster
	now := s.now()
	var recs []history.Record
	type note struct {
		b       *workv1alpha1.ResourceBinding
		ev      EdgeEvent
		msg, at string
	}
	var notes []note
	for _, ev := range evs {
		outcome, ok := edgeOutcomes[ev.Reason]
		if ev.WorkNamespace != own || !ok {
			continue // another cluster's, or not an event the executor makes
		}
		switch {
		case ev.Time.After(now):
			ev.Time = now
		case ev.Time.Before(now.Add(-maxEventAge)):
			ev.Time = now.Add(-maxEventAge)
		}
		ev.Type = corev1.EventTypeNormal
		if outcome == history.OutcomeDrifted {
			ev.Type = corev1.EventTypeWarning
		}
		wk := &workv1alpha1.Work{}
		if err := s.Works.Client(s.Client).Get(ctx, client.ObjectKey{Namespace: ev.WorkNamespace, Name: ev.WorkName}, wk); err != nil {
			continue
		}
		b := workv1alpha1.NewBinding(wk.Labels[workv1alpha1.BindingNamespaceLabel], wk.Labels[workv1alpha1.BindingNameLabel])
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			continue
		}
		msg := truncate(ev.Message, 4096)
		at := ev.Time.UTC().Format(time.RFC3339)
		res := b.BindingSpec().Resource
		gv, _ := schema.ParseGroupVersion(res.APIVersion)
		rev, _ := strconv.ParseInt(wk.Labels[workv1alpha1.RevisionLabel], 10, 64)
		id := sha256.Sum256(fmt.Appendf(nil, "edge|%s|%s|%s|%s|%s", cluster, ev.Time.UTC().Format(time.RFC3339Nano), ev.WorkName, ev.Reason, ev.Message))
		recs = append(recs, history.Record{ID: hex.EncodeToString(id[:16]), Time: ev.Time, Team: b.GetNamespace(),
			Group: gv.Group, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name, Cluster: cluster,
			FromRevision: rev, ToRevision: rev, Cause: history.CauseDrift, Outcome: outcome,
			CauseDetail: "seen by the agent at the edge at " + at, Message: msg})
		if rb, ok := b.(*workv1alpha1.ResourceBinding); ok {
			notes = append(notes, note{b: rb, ev: ev, msg: msg, at: at})
		}
	}
	if s.History != nil && len(recs) > 0 {
		if _, err := s.History.Append(ctx, recs...); err != nil {
			return 0, err
		}
	}
	// Events once the records are in: an event is not repeated for a heartbeat sent again.
	if s.Recorder != nil {
		for _, n := range notes {
			s.Recorder.Eventf(n.b, nil, n.ev.Type, n.ev.Reason, "Drift", "%s (at %s, reported by the agent of %s)", n.msg, n.at, cluster)
		}
		if dropped > 0 {
			s.Recorder.Eventf(&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, nil, corev1.EventTypeWarning, "EdgeEventsDropped", "Report",
				"the agent of %s dropped %d events its journal could not keep while disconnected", cluster, dropped)
		}
	}
	return len(evs), nil
}

// edgeOutcomes are the events an agent's executor makes, and their history outcome.
var edgeOutcomes = map[string]string{"DriftCorrected": history.OutcomeCorrected, "Drifted": history.OutcomeDrifted}

// maxEventAge is how far back an edge event may be dated: an agent disconnected longer dates
// what it kept no earlier than this.
const maxEventAge = 7 * 24 * time.Hour

// customizations lists the platform's customizations and a version that changes with any of
// them (names and generations, and the generation in force).
func (s *Server) customizations(ctx context.Context) (*configv1alpha1.ResourceInterpreterCustomizationList, string, error) {
	list := &configv1alpha1.ResourceInterpreterCustomizationList{}
	if err := s.Client.List(ctx, list); err != nil {
		return nil, "", err
	}
	slices.SortFunc(list.Items, func(a, b configv1alpha1.ResourceInterpreterCustomization) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, c := range list.Items {
		fmt.Fprintf(h, "%s/%d/%d\n", c.Name, c.Generation, c.Status.ActiveGeneration)
	}
	return list, hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// heartbeat takes the agent's view of its member into the clustercache (the cluster
// controller writes it to the Cluster), records the edge's events and answers with what the
// agent must know. Fields go on the Cluster's status, so they are held to its bounds first.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, cl *clusterv1alpha1.Cluster) {
	var hb Heartbeat
	if !decode(w, r, &hb) {
		return
	}
	switch {
	case len(hb.Events) > maxEventsPerBeat:
		http.Error(w, fmt.Sprintf("events: %d in one heartbeat, at most %d", len(hb.Events), maxEventsPerBeat), http.StatusRequestEntityTooLarge)
		return
	case len(hb.APIEnablements) > maxAPIEnablements:
		http.Error(w, fmt.Sprintf("apiEnablements: %d group versions, at most %d", len(hb.APIEnablements), maxAPIEnablements), http.StatusBadRequest)
		return
	case len(hb.AgentVersion) > 64 || len(hb.KubernetesVersion) > 64:
		http.Error(w, "agentVersion and kubernetesVersion: at most 64 characters each", http.StatusBadRequest)
		return
	}
	if !s.limiter(cl.Name).Allow() {
		http.Error(w, "heartbeats of this agent come too often: one every few seconds is enough", http.StatusTooManyRequests)
		return
	}
	h := clustercache.Health{Readiness: hb.Readiness, LastProbeTime: s.now(), LastError: truncate(hb.Error, 1024),
		Version: hb.KubernetesVersion, APIEnablements: hb.APIEnablements, Nodes: hb.Nodes, Resources: hb.Resources,
		Agent: hb.AgentVersion}
	switch hb.Readiness {
	case clustercache.ReadinessReady:
		h.LastError = ""
	case clustercache.ReadinessNotReady:
	default:
		h.Readiness = clustercache.ReadinessUnknown
	}
	s.Members.Report(cl.Name, h)
	taken, err := s.takeEvents(r.Context(), cl.Name, hb.Events, hb.EventsDropped)
	if err != nil {
		// The agent keeps what was not taken and sends it again (records are idempotent).
		logf.FromContext(r.Context()).Error(err, "Recording an agent's events", "cluster", cl.Name)
	}
	_, version, _ := s.customizations(r.Context())
	reply(w, HeartbeatResponse{EventsTaken: taken, Customizations: version})
}

// Bounds of a heartbeat, those of the Cluster's status.
const maxAPIEnablements = 512

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (s *Server) openStream(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[string]int{}
	}
	if s.streams[cluster] >= maxStreamsPerCluster {
		return false
	}
	s.streams[cluster]++
	return true
}

func (s *Server) closeStream(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[cluster]--; s.streams[cluster] <= 0 {
		delete(s.streams, cluster)
	}
}

// limiter is the cluster's heartbeat budget: a burst of a few, then one a second, so a
// compromised agent can neither flood the control plane's writes nor a team's history.
func (s *Server) limiter(cluster string) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limiters == nil {
		s.limiters = map[string]*rate.Limiter{}
	}
	l, ok := s.limiters[cluster]
	if !ok {
		l = rate.NewLimiter(rate.Limit(1), 5)
		if cluster == "" { // registrations: a fleet joined at once registers at once
			l = rate.NewLimiter(rate.Limit(10), 100)
		}
		s.limiters[cluster] = l
	}
	return l
}
