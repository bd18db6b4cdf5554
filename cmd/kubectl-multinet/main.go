// Command kubectl-multinet is multinet's kubectl plugin ("kubectl multinet"):
// "lint" checks manifests offline against the NPWG multi-net spec v1.3,
// "get pods" shows each pod's attachments from its network-status, and
// "explain POD" shows what multinetd would run for a pod.
// Usage, output formats and exit statuses: docs/kubectl-multinet.md.
package main

import (
	"os"

	"github.com/multinet/multinet/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
