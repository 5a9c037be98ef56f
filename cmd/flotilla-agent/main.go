// Command flotilla-agent runs in a Pull member: it dials the control plane's agent endpoint,
// registers once with the bootstrap token `flotilla join NAME --mode Pull` printed, and then
// applies its cluster's Works to the member and reports back (package agent). It holds
// credentials for its own member only; the control plane holds none for it. Its flags are
// those of `flotilla agent`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	_ "golang.org/x/crypto/x509roots/fallback" // CA roots in the image, which has no /etc/ssl
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/internal/agent"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 0 ok, 1 an error, 2 a usage error.
func run(args []string) int {
	fs := pflag.NewFlagSet("flotilla-agent", pflag.ContinueOnError)
	var kubeconfig string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the member this agent runs in; empty: $KUBECONFIG, else the in-cluster service account")
	flags := &agent.Flags{}
	flags.Bind(fs)
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		return 0
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments %q: flotilla-agent takes flags only (-h lists them)\n", fs.Args())
		return 2
	}
	o, err := flags.Options()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctrl.SetLogger(flags.Logger())
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "member: %v (give --kubeconfig, or run in a pod with a service account)\n", err)
		return 1
	}
	if err := agent.Run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
