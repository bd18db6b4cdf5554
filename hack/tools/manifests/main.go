// Command manifests renders a deploy/ overlay (make manifests), with
// multinet's images pinned by digest when -digests names a file of
// "<image> <repository>@sha256:<hex>" lines (make images writes
// _output/images/digests.txt; after a push, the registry's digests).
//
//	manifests -overlay deploy/overlays/default -digests digests.txt -o _output/deploy/default.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/multinet/multinet/internal/render/manifests"
)

func main() {
	overlay := flag.String("overlay", "deploy/overlays/default", "kustomize overlay to render")
	digestsFile := flag.String("digests", "", "file of \"<image> <repository>@sha256:<hex>\" lines; every multinet image is then pinned by digest")
	out := flag.String("o", "", "output file (default: stdout)")
	flag.Parse()
	var d manifests.Digests
	if *digestsFile != "" {
		var err error
		if d, err = manifests.ReadDigests(*digestsFile); err != nil {
			fail(err)
		}
	}
	b, err := manifests.Render(*overlay, d)
	if err != nil {
		fail(err)
	}
	if *out == "" {
		_, _ = os.Stdout.Write(b)
		return
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "manifests: %s written\n", *out)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "manifests: %v\n", err)
	os.Exit(1)
}
