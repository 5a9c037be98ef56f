package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/pull"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// AgentOptions say where Pull members' agents dial in.
type AgentOptions struct {
	// Address is host:port of the agent endpoint; empty: Pull members cannot connect.
	Address string
	// Silence is how long an agent may stay silent before its Cluster is not Ready.
	Silence time.Duration
	// CertificateTTL is how long an agent's client certificate is valid.
	CertificateTTL time.Duration
}

// agentServer serves the agent endpoint with the inventory API's serving certificate. Client
// certificates are requested, not verified by TLS: only the agents' own CA is trusted there,
// and package pull checks them against it and against the certificate each Cluster records.
// It runs on the leader only, which keeps the Works.
func (o Options) agentServer(mgr ctrl.Manager, works *workstore.Store, members *clustercache.Cache, hist pull.HistoryAppender, recorder events.EventRecorder) (manager.Runnable, error) {
	if _, _, err := net.SplitHostPort(o.Agents.Address); err != nil {
		return nil, fmt.Errorf("--agent-bind-address %q: give host:port, for example 0.0.0.0:8444", o.Agents.Address)
	}
	if o.Inventory.CertFile == "" || o.Inventory.KeyFile == "" {
		return nil, errors.New("--agent-bind-address needs --inventory-tls-cert-file and --inventory-tls-key-file: the agent endpoint is served over TLS with the same certificate (agents trust its CA with --ca-file)")
	}
	cert, err := tls.LoadX509KeyPair(o.Inventory.CertFile, o.Inventory.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--inventory-tls-cert-file/--inventory-tls-key-file: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	return manager.RunnableFunc(func(ctx context.Context) error {
		// The CA is read (or made) once this replica leads: it is a write to the control plane.
		ca, err := pull.LoadCA(ctx, directClient{mgr})
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: (&pull.Server{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Works: works, CA: ca,
			Members: members, CertificateTTL: o.Agents.CertificateTTL, History: hist, Recorder: recorder}).Handler(), TLSConfig: tc,
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
		l, err := tls.Listen("tcp", o.Agents.Address, tc)
		if err != nil {
			return fmt.Errorf("serving the agent endpoint on %s: %w", o.Agents.Address, err)
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		ctrl.Log.WithName("pull").Info("Serving the agent endpoint", "address", o.Agents.Address)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}), nil
}

// directClient reads through the API reader (the manager's cache does not hold the CA
// Secret) and writes with the manager's client.
type directClient struct{ mgr ctrl.Manager }

func (d directClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return d.mgr.GetAPIReader().Get(ctx, key, obj)
}

func (d directClient) Create(ctx context.Context, obj client.Object) error {
	return d.mgr.GetClient().Create(ctx, obj)
}
