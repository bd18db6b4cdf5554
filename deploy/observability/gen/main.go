// Command gen writes deploy/observability's generated files (the dashboard,
// the rules, the PrometheusRule, the PodMonitors) into the directory it runs
// in, or the one named by its only argument.
package main

import (
	"fmt"
	"os"

	"github.com/multinet/multinet/deploy/observability"
)

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := observability.Write(dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
