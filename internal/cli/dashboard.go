package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/dashboard"
	"github.com/flotilla-dev/flotilla/internal/release"
)

// steerRelease is the dashboard's release actions: the checks and answers of `flotilla
// release VERB` (package release), on the release the user clicked, as that user.
func steerRelease(ctx context.Context, c client.Client, namespace, name, verb string) (string, error) {
	return release.Steer(ctx, c, namespace, name, verb, release.SteerOptions{Command: invokedName()})
}

func newDashboardCommand(g *globals) *cobra.Command {
	var (
		address, invURL, certFile, keyFile string
		tokensOnly                         bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the web dashboard: the fleet matrix, clusters, releases live and history (as you)",
		Long: `Serve the web dashboard: applications x clusters with versions, health, sync and drift;
clusters; releases live with their analysis; the history timeline.

It reads through the inventory API and acts on the control plane with the identity of whoever
logged in, never with rights of its own. It prints a login link that stands for your own
kubeconfig identity (keep it to yourself); others log in with a bearer token. With
--tokens-only there is no such link (for a dashboard served to others).

The controller-manager serves the same dashboard with --dashboard at
https://INVENTORY/dashboard/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			base, err := g.inventoryURL(invURL)
			if err != nil {
				return err
			}
			if (certFile == "") != (keyFile == "") {
				return errors.New("--tls-cert-file and --tls-key-file go together")
			}
			if host, _, err := net.SplitHostPort(address); err != nil {
				return fmt.Errorf("--address %q: give host:port, for example 127.0.0.1:8090", address)
			} else if ip := net.ParseIP(host); certFile == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return fmt.Errorf("--address %s reaches beyond this machine: give --tls-cert-file and --tls-key-file, or tokens and session cookies would travel in clear", address)
			}
			opts := dashboard.Options{InventoryURL: base, ControlPlane: rest.AnonymousClientConfig(cfg), Steer: steerRelease}
			if !tokensOnly {
				key := make([]byte, 24)
				_, _ = rand.Read(key)
				opts.Local, opts.LocalKey = cfg, base64.RawURLEncoding.EncodeToString(key)
			}
			dash, err := dashboard.New(opts)
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", address)
			if err != nil {
				return fmt.Errorf("--address %s: %w", address, err)
			}
			scheme := "http"
			if certFile != "" {
				scheme = "https"
			}
			url := fmt.Sprintf("%s://%s/", scheme, l.Addr())
			fmt.Fprintf(cmd.OutOrStdout(), "Flotilla dashboard on %s (reads and acts as whoever logs in)\n", url)
			if opts.LocalKey != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Open as yourself: %slogin?key=%s\n(the link works until this command stops; keep it to yourself, or use --tokens-only)\n", url, opts.LocalKey)
			}
			srv := &http.Server{Handler: dash.Handler(), ReadHeaderTimeout: 10 * time.Second}
			ctx := cmd.Context()
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			if certFile != "" {
				err = srv.ServeTLS(l, certFile, keyFile)
			} else {
				err = srv.Serve(l)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "address", "127.0.0.1:8090", "where to listen (loopback unless told otherwise; use TLS flags when others reach it)")
	f.StringVar(&invURL, "inventory-url", "", "the inventory API (default: $FLOTILLA_INVENTORY_URL, else the local fleet's)")
	f.StringVar(&certFile, "tls-cert-file", "", "serve HTTPS with this certificate")
	f.StringVar(&keyFile, "tls-key-file", "", "and this key")
	f.BoolVar(&tokensOnly, "tokens-only", false, "no login link for your own identity: everyone logs in with a bearer token")
	return cmd
}
