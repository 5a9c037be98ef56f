// Command flotilla-controller-manager runs Flotilla's controllers, the inventory API and the
// dashboard against a control plane, and nothing else: it links none of the local fleet,
// bench, demo or browser code of the flotilla CLI, so an image holds only what runs in a
// cluster. Its flags are those of `flotilla controller-manager`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	_ "golang.org/x/crypto/x509roots/fallback" // CA roots in the image, which has no /etc/ssl
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/internal/manager"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 0 ok, 1 an error, 2 a usage error.
func run(args []string) int {
	fs := pflag.NewFlagSet("flotilla-controller-manager", pflag.ContinueOnError)
	var kubeconfig, kubeContext string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the control plane; empty: $KUBECONFIG, else the in-cluster service account, else ~/.kube/config")
	fs.StringVar(&kubeContext, "context", "", "kubeconfig context to use (default: its current context)")
	flags := manager.NewFlags()
	flags.Bind(fs)
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		return 0
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments %q: flotilla-controller-manager takes flags only (-h lists them)\n", fs.Args())
		return 2
	}
	o, err := flags.Options(fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctrl.SetLogger(flags.Logger())
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "control plane: %v (give --kubeconfig, or run in a pod with a service account)\n", err)
		return 1
	}
	if err := manager.Run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
