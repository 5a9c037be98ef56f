// Command flotilla-supervisor runs one component of a local fleet and starts it again whenever
// it exits: what `flotilla supervise` does, with the standard library only, so each of the two
// hundred supervisors of a hundred slim members holds about a megabyte instead of ten.
// `flotilla up` uses it when it lies beside the flotilla binary.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "supervise" {
		fmt.Fprintln(os.Stderr, "usage: flotilla-supervisor supervise --component=NAME --state-dir=DIR [--stop-grace=10s] -- BINARY [ARGS...]")
		os.Exit(2)
	}
	s, err := supervisor.Parse(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	s.Log = os.Stdout
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := s.Run(signals); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
