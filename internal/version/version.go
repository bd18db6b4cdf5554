// Package version holds the build's version and the -version flag shared by
// multinet's daemons (multinetd, multinet-webhook, multinet-deviceplugin).
package version

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// Version is stamped at build time:
// -ldflags "-X github.com/multinet/multinet/internal/version.Version=TAG"
// (hack/images.sh); "dev" otherwise.
var Version = "dev"

// Flag registers -version on flag.CommandLine; pass its value to Handle
// after flag.Parse.
func Flag() *bool {
	return flag.Bool("version", false, "print the version and exit")
}

// Handle prints Version and exits 0 when show is set; otherwise it logs
// "<component> starting" with the version (klog, level 0).
func Handle(show bool, component string) {
	if show {
		fmt.Println(Version)
		os.Exit(0)
	}
	klog.InfoS(component+" starting", "version", Version)
}
