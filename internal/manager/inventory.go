package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/dashboard"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/inventory"
	"github.com/flotilla-dev/flotilla/internal/release"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// server is the inventory API as a runnable of the manager. It runs on the leader only (a
// runnable without NeedLeaderElection): the audit events it takes feed the leader's historian,
// and a sharded leader serves its Works beside it.
func (o InventoryOptions) server(cfg *rest.Config, c client.Reader, informers cache.Informers, store history.Store, preview inventory.Previewer, writers *audit.Log, works *worksync.Server) (manager.Runnable, error) {
	if _, _, err := net.SplitHostPort(o.Address); err != nil {
		return nil, fmt.Errorf("--inventory-bind-address %q: give host:port, for example 127.0.0.1:8443", o.Address)
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("--inventory-bind-address needs --inventory-tls-cert-file and --inventory-tls-key-file: the inventory API is served over TLS only")
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--inventory-tls-cert-file/--inventory-tls-key-file: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--inventory-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--inventory-client-ca-file %s holds no PEM certificate", o.ClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api := inventory.New(c, store, kube)
	api.Preview = preview
	api.Changes = inventory.NewChanges()
	handler := api.Handler()
	mux := http.NewServeMux()
	mux.Handle("/", handler)
	if writers != nil {
		if o.ClientCAFile == "" {
			return nil, errors.New("--audit-webhook-client-names needs --inventory-client-ca-file: the audit webhook is known by its client certificate")
		}
		mux.Handle(audit.Path, writers.Handler(o.AuditClientNames...))
	}
	if works != nil {
		// The leader's Works, for the other replicas of a sharded controller-manager.
		works.Kube = kube
		works.Authenticate = func(r *http.Request) (*worksync.Caller, error) {
			u, err := api.Authenticate(r)
			if err != nil {
				return nil, err
			}
			return &worksync.Caller{Name: u.Name, Groups: u.Groups, UID: u.UID, Extra: u.Extra}, nil
		}
		works.Register(mux)
	}
	if o.Dashboard {
		dash, err := dashboard.New(dashboard.Options{InventoryTransport: dashboard.HandlerTransport(handler),
			ControlPlane: rest.AnonymousClientConfig(cfg), Steer: steerRelease, Prefix: "/dashboard/"})
		if err != nil {
			return nil, err
		}
		mux.Handle("/dashboard/", dash.Handler())
	}
	srv := &http.Server{Addr: o.Address, Handler: mux, TLSConfig: tc,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	return manager.RunnableFunc(func(ctx context.Context) error {
		if err := api.Changes.Feed(ctx, informers); err != nil {
			return fmt.Errorf("the inventory API's change feed: %w", err)
		}
		l, err := tls.Listen("tcp", o.Address, tc)
		if err != nil {
			return fmt.Errorf("serving the inventory API on %s: %w", o.Address, err)
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}), nil
}

// steerRelease carries out the dashboard's release actions with the release controller's own
// steering (the checks and answers of `flotilla release VERB`), as the user who clicked.
func steerRelease(ctx context.Context, c client.Client, namespace, name, verb string) (string, error) {
	return release.Steer(ctx, c, namespace, name, verb, release.SteerOptions{Command: "flotilla"})
}
