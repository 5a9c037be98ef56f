// Package worksync carries Works between a sharded controller-manager's replicas. The leader
// keeps every Work in its store (package workstore); each replica applies those of the clusters
// it holds (package shard) from a mirror store: Runner follows the leader's store into the mirror
// and reports back what the replica's executor wrote (status and finalizers). The leader serves
// its store over HTTPS beside the inventory API (Handler); a replica that leads reads its own
// store in-process.
//
// It owns the protocol only: it never renders, applies or decides placement, and it serves Works
// only to callers the control plane allows to write Work status (the controller-manager).
package worksync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

const (
	// FollowPath streams the Works of the clusters named by `cluster` parameters.
	FollowPath = "/works/v1alpha1/follow"
	// ReportPath takes a JSON array of workstore.Report.
	ReportPath = "/works/v1alpha1/reports"
	// pingEvery keeps an idle stream visibly alive; a follower gives up after idleTimeout.
	pingEvery   = 10 * time.Second
	idleTimeout = 3 * pingEvery
	// maxReportBytes bounds one report batch.
	maxReportBytes = 64 << 20
)

// Upstream is where Works come from: the leader's store, in-process or over HTTPS.
type Upstream interface {
	// Follow calls fn with the Works of clusters (Added), then Synced, then their changes.
	Follow(ctx context.Context, clusters []string, fn func(workstore.Event) error) error
	// Report hands the leader what this replica's executor wrote.
	Report(ctx context.Context, reports []workstore.Report) error
}

// inClusters selects the Works in the execution namespaces of clusters.
func inClusters(clusters []string) func(*workv1alpha1.Work) bool {
	set := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		set[kube.ExecutionNamespacePrefix+c] = true
	}
	return func(w *workv1alpha1.Work) bool { return set[w.Namespace] }
}

// Local is the leader's own store as an Upstream.
type Local struct{ Store *workstore.Store }

func (l Local) Follow(ctx context.Context, clusters []string, fn func(workstore.Event) error) error {
	// The events share the store's Works: the mirror keeps their specs and modifies nothing.
	return l.Store.Follow(ctx, inClusters(clusters), fn)
}

func (l Local) Report(_ context.Context, reports []workstore.Report) error {
	return applyReports(l.Store, reports)
}

// applyReports applies each report; one of a Work gone or rendered again is stale, not an error.
func applyReports(s *workstore.Store, reports []workstore.Report) error {
	var errs []error
	for _, r := range reports {
		if err := s.Apply(r); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("work %s/%s: %w", r.Namespace, r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Remote is a leader replica reached over HTTPS.
type Remote struct {
	Base   string // https://host:port
	Client *http.Client
}

// PeerConfig is how a replica reaches the others: its own control-plane credentials (the
// leader checks them with the control plane), the CA of the replicas' serving certificates
// and the name they are served under.
type PeerConfig struct {
	Credentials *rest.Config
	CAFile      string
	ServerName  string
}

// Dial returns the replica at address as an Upstream.
func (p PeerConfig) Dial(address string) (*Remote, error) {
	cfg := rest.CopyConfig(p.Credentials)
	cfg.Host = "https://" + address
	cfg.CAFile, cfg.CAData, cfg.Insecure = p.CAFile, nil, false
	cfg.ServerName = p.ServerName
	cfg.Timeout = 0 // streams last; idleness is watched instead
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for replica %s: %w", address, err)
	}
	return &Remote{Base: cfg.Host, Client: hc}, nil
}

func (r *Remote) Follow(ctx context.Context, clusters []string, fn func(workstore.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{"cluster": clusters}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Base+FollowPath+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	// A stream that says nothing (not even its pings) for idleTimeout is dead.
	alive := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(idleTimeout)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-alive:
				t.Reset(idleTimeout)
			case <-t.C:
				cancel()
				return
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), maxReportBytes)
	for sc.Scan() {
		select {
		case alive <- struct{}{}:
		default:
		}
		var e workstore.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("reading the Works stream: %w", err)
		}
		if e.Type == "" {
			continue // ping
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

func (r *Remote) Report(ctx context.Context, reports []workstore.Report) error {
	body, err := json.Marshal(reports)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Base+ReportPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return responseError(resp)
	}
	return nil
}

func responseError(resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s %s: %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status, strings.TrimSpace(string(msg)))
}
