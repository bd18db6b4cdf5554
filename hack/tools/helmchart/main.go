// Command helmchart generates multinet's Helm chart from deploy/ (make helm;
// internal/render/helmchart, docs/decisions/helm.md):
//
//	helmchart -root . -o deploy/helm/multinet          # write it
//	helmchart -root . -o deploy/helm/multinet -check   # exit 1 when it is stale (make verify)
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/multinet/multinet/internal/render/helmchart"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	out := flag.String("o", "deploy/helm/multinet", "the chart's directory")
	check := flag.Bool("check", false, "write nothing; exit 1 when the chart in -o differs from the generated one")
	flag.Parse()
	files, err := helmchart.Generate(*root)
	if err != nil {
		fail(err)
	}
	if *check {
		if stale := helmchart.Diff(*out, files); len(stale) > 0 {
			fail(fmt.Errorf("%s is not what deploy/ generates (run make helm): %s", *out, strings.Join(stale, ", ")))
		}
		return
	}
	if err := helmchart.Write(*out, files); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "helmchart: %s written (%d files)\n", *out, len(files))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "helmchart: %v\n", err)
	os.Exit(1)
}
