// Command flotilla is the one binary of Flotilla: the controller-manager, the local fleet and
// the command line. Installed as kubectl-flotilla it is also a kubectl plugin.
package main

import (
	"context"
	"os"

	"github.com/flotilla-dev/flotilla/internal/cli"
)

func main() {
	os.Exit(cli.Execute(context.Background()))
}
