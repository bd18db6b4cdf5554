// Command multinet-delegate-launcher is multinetd's delegate launcher
// (package nodeexec, docs/decisions/deploy.md "How delegates run"): multinetd
// starts it with the control socket as file descriptor 3 and the argument
// --nodeexec-launcher, moves it once into the node cgroup, and has it start
// every delegate plugin there. It is not meant to be run by hand.
//
// It is a binary of its own, next to multinetd, so that the launcher, which
// lives as long as multinetd, holds only this small program in memory and
// not multinetd's (3 MiB instead of 30 MiB of RSS).
package main

import (
	"fmt"
	"os"

	"github.com/multinet/multinet/internal/node/nodeexec"
)

func main() {
	// Serves launch requests and exits when it gets the launcher argument.
	nodeexec.MaybeServeLauncher()
	fmt.Fprintf(os.Stderr, "%s is multinetd's delegate launcher: multinetd starts it with %s and its control socket; it is not run by hand\n", os.Args[0], nodeexec.LauncherArg)
	os.Exit(2)
}
